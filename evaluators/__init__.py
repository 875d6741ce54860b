"""Pure functions over records: retrieval metrics, ordering, statistics, RAVEL's scores.

Nothing here reads a results folder or writes a file of its own; the reports over results are `mmbench.reports`.

Imports: `mmbench.common` and `mmbench.data`.
"""
