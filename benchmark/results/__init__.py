"""Results on disk: per-query records, the mteb TaskResult layout, summaries, and rerun detection.

Imports: common, data, the pure evaluators (metrics, ordering), tasks. Never the runner or the CLI.
"""
