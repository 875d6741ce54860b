"""`python -m mmbench`: the mmbench command line."""
import sys

from mmbench.cli import main

if __name__ == "__main__":
    sys.exit(main())
