"""Errors the CLI prints without a traceback."""


class CLIError(Exception):
    """A user-facing error (unknown task or model, bad argument): exit code 2."""
