"""Leaderboards: submission validation (schema, files, official), the board store, tables (boards) and the static site."""
