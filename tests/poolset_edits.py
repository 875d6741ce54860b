"""Test helpers: run `mmbench validate` on a folder, and rewrite a built pool set after editing it in memory."""
from __future__ import annotations

from pathlib import Path

from mmbench.cli import main
from mmbench.data.poolset import load_poolset, write_poolset


def validate_cli(folder: Path, capsys) -> tuple[int, str]:
    """`mmbench validate FOLDER`: its exit code and everything it printed."""
    try:
        rc = main(["validate", str(folder)])
    except SystemExit as exc:
        rc = exc.code
    out = capsys.readouterr()
    return rc, out.out + out.err


def rewrite(src: Path, dst: Path, edit) -> Path:
    """The pool set at `src`, changed by `edit(ps)`, written to `dst` with its stored validity report."""
    ps = load_poolset(src)
    edit(ps)
    write_poolset(ps, dst, media_from=src / "media" if (src / "media").is_dir() else None,
                  extra_manifest={k: ps.manifest[k] for k in ("validity", "dropped") if k in ps.manifest})
    return dst
