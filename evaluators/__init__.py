"""Pure functions over records: retrieval metrics, statistics, RAVEL; `reports/` reads results into tables.

Imports: `mmbench.common` and `mmbench.data` (and, for `reports/`, `mmbench.tasks` and `mmbench.results`).
"""
