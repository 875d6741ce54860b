"""Embedding model adapters, one module per family, and the registry of short names (`registry.py`); RAVEL's
feature models (vision encoders' patch tokens, an LLM's caption vectors) by kind (`feature_models.py`).

Imports: `mmbench.common` and `mmbench.data` only; nothing downstream of a model (runner, results, tasks).
"""
