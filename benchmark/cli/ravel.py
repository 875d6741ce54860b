"""`mmbench ravel …`: RAVEL vision-encoder evaluation (implementation in mmbench.evaluators.ravel.cli)."""
from mmbench.evaluators.ravel.cli import main, register  # noqa: F401
