"""`--quiet`: besides mmbench's own progress bars, the libraries' progress bars and info logs."""
from __future__ import annotations

import logging
import os
import sys
import warnings

# Read by the libraries when they are imported (mmbench imports them lazily, after the flag is seen).
# TOKENIZERS_PARALLELISM set (to true) keeps the tokenizers library from warning when a process forks after it
# tokenised; "false" silenced it too but tokenised on one core: a cold MiniLM run on the MSR sample took 8.3-9.4 s
# against 7.6-7.8 s. mmbench forks only to exec (git, for provenance), so a child never tokenises.
_ENV = {"TRANSFORMERS_VERBOSITY": "error", "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "TOKENIZERS_PARALLELISM": "true", "DATASETS_VERBOSITY": "error"}


def quiet_libraries() -> None:
    for key, value in _ENV.items():
        os.environ.setdefault(key, value)
    for name in ("transformers", "sentence_transformers", "huggingface_hub", "datasets", "mteb", "ray", "torch"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", category=FutureWarning)
    if "transformers" in sys.modules:  # already imported: its settings were read, so set them directly
        from transformers.utils import logging as tlog

        tlog.set_verbosity_error()
        tlog.disable_progress_bar()
    if "huggingface_hub" in sys.modules:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    if "datasets" in sys.modules:
        import datasets

        datasets.disable_progress_bars()
        datasets.logging.set_verbosity_error()
