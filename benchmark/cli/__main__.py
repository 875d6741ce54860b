import sys

from mmbench.cli import main

sys.exit(main())
