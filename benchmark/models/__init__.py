"""Embedding model adapters, one module per family, and the registry of short names (`registry.py`).

Imports: `mmbench.common` and `mmbench.data` only; nothing downstream of a model (runner, results, tasks).
"""
