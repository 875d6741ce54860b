"""The RAVEL command chain whose outputs are stored in `tests/data/ravel_golden/` (see test_ravel_golden.py).

`run_chain(folder)` runs, through the command line only, `ravel tiny-models -> calibrate -> score -> correlate`
on the offline `sample` source and on a small Karpathy-split JSON with generated images, and returns the bytes
of every output file by name. `python tests/ravel_golden.py` rewrites the stored files (only when RAVEL's
numbers are meant to change).
"""
from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parent
GOLDEN = ROOT / "data" / "ravel_golden"
TABLE1_SCORES = ROOT / "data" / "ravel_alignment_probing_210.csv"


# How far a number may move between CPUs, relative (absolute near zero). Float64 sums from stored scores (table1)
# move in the last bits only. The tiny models' float32 features move by an ulp or two between kernels (AVX2
# against AVX-512, MKL against OpenBLAS; a CI machine gave CKA 0.405873129 against 0.405873408 stored), and the
# scores built on them move with them: tests/test_ravel_golden.py moves every feature by up to two float32 ulps
# and needs these bounds to hold, while a real change (another k) still breaks them by orders of magnitude.
FLOAT_NOISE = (1e-9, 1e-12)
FLOAT32_FEATURE_NOISE = (1e-4, 1e-7)


def float_noise_diff(got: bytes, stored: bytes, noise: tuple[float, float] = FLOAT_NOISE) -> str | None:
    """Where `got` differs from `stored` by more than floating-point noise (None: nowhere). Lines and fields must
    match as text, except fields that are both numbers, which may differ by `noise` (relative, absolute near
    zero). BLAS and SIMD kernels differ between CPUs in the last bits (scipy's Pearson r on an AMD EPYC
    with AVX2 against the Intel machine the files were written on: 0.6399206025704066 and ...067)."""
    import math

    got_lines, stored_lines = got.decode().splitlines(), stored.decode().splitlines()
    if len(got_lines) != len(stored_lines):
        return f"{len(got_lines)} lines against {len(stored_lines)} stored"
    for n, (a_line, b_line) in enumerate(zip(got_lines, stored_lines), 1):
        a_fields, b_fields = a_line.split(","), b_line.split(",")
        if len(a_fields) != len(b_fields):
            return f"line {n}: {len(a_fields)} fields against {len(b_fields)} stored"
        for a, b in zip(a_fields, b_fields):
            if a == b:
                continue
            try:
                x, y = float(a), float(b)
            except ValueError:
                return f"line {n}: {a!r} against {b!r} stored"
            if not math.isclose(x, y, rel_tol=noise[0], abs_tol=noise[1]):
                return f"line {n}: {a} against {b} stored (beyond float noise)"
    return None


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


@contextmanager
def another_cpus_features(seed: int) -> Iterator[None]:
    """Every visual and text feature the chain extracts moved by up to two float32 ulps, each way at random: what
    another CPU's kernels give for the same model and input."""
    import numpy as np

    from mmbench.running import ravel_features

    rng = np.random.default_rng(seed)
    originals = ravel_features.extract_visual, ravel_features.extract_text

    def moved(extract: Callable[..., Any]) -> Callable[..., Any]:
        def extract_elsewhere(*args: Any, **kwargs: Any) -> Any:
            features = extract(*args, **kwargs).copy()
            for _ in range(2):
                step = rng.integers(-1, 2, size=features.shape)
                features = np.where(step > 0, np.nextafter(features, np.float32(np.inf)),
                                    np.where(step < 0, np.nextafter(features, np.float32(-np.inf)), features))
            return features.astype(np.float32)
        return extract_elsewhere

    ravel_features.extract_visual, ravel_features.extract_text = (moved(f) for f in originals)
    try:
        yield
    finally:
        ravel_features.extract_visual, ravel_features.extract_text = originals


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
