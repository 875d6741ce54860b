"""The thresholds a backend parity certificate is judged by (light to import: the CLI states them in its help)."""

DEFAULT_MIN_COSINE = 0.99          # every probe item's vectors from the two paths at least this close
DEFAULT_MIN_TOP1_AGREEMENT = 1.0   # share of the probe's retrieval pairs whose top-1 the two paths agree on
