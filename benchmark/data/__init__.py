"""The document model and pool-set storage: documents, token counts, media, pool sets, the embedding cache,
RAVEL's calibration set and its manifest.

Imports: `mmbench.common` only. Everything later in the pipeline reads these records.
"""
