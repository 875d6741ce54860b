"""Readers of the source datasets in their official layouts, and the offline `sample` sources.

Imports: `mmbench.common`, `mmbench.data` and one another; never a construction step or a builder.
"""
