"""Plumbing every stage may use: folders and locks, file digests, HTTP, plugins, user errors.

Imports: nothing from mmbench outside `mmbench.common`.
"""
