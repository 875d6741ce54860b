"""The RAVEL command chain whose outputs are stored in `tests/data/ravel_golden/` (see test_ravel_golden.py).

`run_chain(folder)` runs, through the command line only, `ravel tiny-models -> calibrate -> score -> correlate`
on the offline `sample` source and on a small Karpathy-split JSON with generated images, and returns the bytes
of every output file by name. `python tests/ravel_golden.py` rewrites the stored files (only when RAVEL's
numbers are meant to change).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent
GOLDEN = ROOT / "data" / "ravel_golden"
TABLE1_SCORES = ROOT / "data" / "ravel_alignment_probing_210.csv"


def write_karpathy(folder: Path, n: int = 12) -> tuple[Path, Path]:
    """A Karpathy-split JSON (dataset_flickr30k.json layout) over `n` generated PNG images."""
    from PIL import Image

    images = folder / "flickr-images"
    images.mkdir(parents=True, exist_ok=True)
    records = []
    for i in range(n):
        Image.new("RGB", (40, 40), ((37 * i) % 256, (91 * i) % 256, (53 * i) % 256)).save(images / f"{i}.png")
        records.append({"imgid": i, "filename": f"{i}.png", "split": "test",
                        "sentences": [{"raw": f"A picture number {i} in colour {(37 * i) % 7}. "},
                                      {"raw": "a second caption"}]})
    path = folder / "dataset_flickr30k.json"
    path.write_text(json.dumps({"dataset": "flickr30k", "images": records}))
    return path, images


def run_chain(folder: Path) -> dict[str, bytes]:
    from mmbench.cli import main

    folder = Path(folder)
    tiny = folder / "tiny"

    def ok(*argv: str) -> None:
        assert main(list(argv)) == 0, argv

    ok("ravel", "tiny-models", "--out", str(tiny))
    ok("ravel", "calibrate", "--source", "sample", "--n", "30", "--out", str(folder / "cal.jsonl"))
    ok("ravel", "score", "--manifest", str(folder / "cal.jsonl"), "--cache-dir", str(folder / "cache"),
       "--encoder", f"clip={tiny / 'clip'}", "--encoder", f"siglip={tiny / 'siglip'}",
       "--encoder", f"dinov2reg={tiny / 'dinov2reg'}", "--llm", f"Qwen3-1.7B={tiny / 'llm'}",
       "--k", "5", "--methods", "all", "--out", str(folder / "scores.csv"))
    write_karpathy(folder)
    here = os.getcwd()
    os.chdir(folder)  # relative paths: the manifest (and its fingerprint) is the same in any folder
    try:
        ok("ravel", "calibrate", "--source", "karpathy", "--json", "dataset_flickr30k.json", "--image-root",
           "flickr-images", "--n", "10", "--out", "karpathy.jsonl")
    finally:
        os.chdir(here)
    os.chdir(folder)
    try:
        ok("ravel", "score", "--manifest", "karpathy.jsonl", "--cache-dir", "",
           "--encoder", f"dinov2reg={tiny / 'dinov2reg'}", "--layer", "-2", "--llm", f"q={tiny / 'llm'}",
           "--text-pool", "last", "--k", "3", "--methods", "ravel,mutualnn,cka", "--out", "karpathy.csv")
    finally:
        os.chdir(here)
    ok("ravel", "correlate", "--scores", str(TABLE1_SCORES), "--score-column", "mean_recall_5cap",
       "--out", str(folder / "table1.csv"))
    names = ("cal.jsonl", "scores.csv", "scores.manifest.jsonl", "karpathy.jsonl", "karpathy.csv", "table1.csv")
    return {name: (folder / name).read_bytes() for name in names}


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for name, data in run_chain(Path(tmp)).items():
            (GOLDEN / name).write_bytes(data)
            print(f"wrote {GOLDEN / name} ({len(data)} bytes)")
