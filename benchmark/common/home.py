"""Where mmbench keeps what it builds and caches: MMBENCH_HOME, else ~/.cache/mmbench."""
from __future__ import annotations

import os
from pathlib import Path


def mmbench_home() -> Path:
    """Default pool sets, the embedding cache and the file-digest memo live here."""
    return Path(os.environ.get("MMBENCH_HOME") or Path.home() / ".cache" / "mmbench")
