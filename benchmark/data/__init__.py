"""The document model and pool-set storage: documents, token counts, media, pool sets, the embedding cache.

Imports: `mmbench.common` only. Everything later in the pipeline reads these records.
"""
