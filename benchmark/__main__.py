"""`python -m mmbench`: the mmbench command line."""
import sys

from mmbench.cli import program

if __name__ == "__main__":
    sys.exit(program())
