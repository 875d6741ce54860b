"""RAVEL's numbers do not move: the command chain's outputs equal the stored ones (byte for byte where they hold no
computed float; up to the last bits BLAS kernels change between CPUs where they do).

`tests/data/ravel_golden/` was written by `tests/ravel_golden.py` before RAVEL's model loading, data readers and
feature cache moved out of `evaluators/ravel/` (the Table 1 correlations from the authors' released scores, and
the tiny-model scores of `tiny-models -> calibrate -> score` on the sample and on a Karpathy-split source).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from ravel_golden import FLOAT32_FEATURE_NOISE, FLOAT_NOISE, GOLDEN, another_cpus_features, float_noise_diff, run_chain

# files without computed floats: byte for byte; the rest up to the last bits that differ between CPUs (float32
# model features: a few ulps, and what the scores built on them make of that)
EXACT = {"cal.jsonl", "scores.manifest.jsonl", "karpathy.jsonl"}
FROM_FEATURES = {"scores.csv", "karpathy.csv"}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("golden")


@pytest.fixture(scope="module")
def outputs(folder: Path) -> dict[str, bytes]:
    return run_chain(folder)


@pytest.mark.parametrize("name", ["cal.jsonl", "scores.csv", "scores.manifest.jsonl", "karpathy.jsonl",
                                  "karpathy.csv", "table1.csv"])
def test_ravel_outputs_are_the_stored_ones(outputs: dict[str, bytes], name: str) -> None:
    stored = (GOLDEN / name).read_bytes()
    if name in EXACT:
        assert outputs[name] == stored, f"{name} differs from {Path(GOLDEN / name)}"
    else:
        noise = FLOAT32_FEATURE_NOISE if name in FROM_FEATURES else FLOAT_NOISE
        assert float_noise_diff(outputs[name], stored, noise) is None, \
            f"{name}: {float_noise_diff(outputs[name], stored, noise)}"


@pytest.mark.parametrize("seed", [0, 1])
def test_another_cpus_features_pass_and_another_k_does_not(tmp_path: Path, seed: int) -> None:
    """The comparison forgives what another CPU changes and nothing a real change does: features moved by up to two
    float32 ulps (as a CI machine's kernels moved them) still match the stored scores, and visibly moved them
    (the float64 bound alone refuses them); the same features scored at k = 4 do not match."""
    from mmbench.cli import main

    with another_cpus_features(seed):
        moved = run_chain(tmp_path)
    for name in sorted(FROM_FEATURES):
        stored = (GOLDEN / name).read_bytes()
        assert float_noise_diff(moved[name], stored, FLOAT32_FEATURE_NOISE) is None, name
    assert any(float_noise_diff(moved[name], (GOLDEN / name).read_bytes()) for name in FROM_FEATURES)
    tiny = tmp_path / "tiny"
    assert main(["ravel", "score", "--manifest", str(tmp_path / "cal.jsonl"), "--cache-dir", str(tmp_path / "cache"),
                 "--encoder", f"clip={tiny / 'clip'}", "--encoder", f"siglip={tiny / 'siglip'}",
                 "--encoder", f"dinov2reg={tiny / 'dinov2reg'}", "--llm", f"Qwen3-1.7B={tiny / 'llm'}",
                 "--k", "4", "--methods", "all", "--out", str(tmp_path / "k4.csv")]) == 0
    assert "beyond float noise" in str(float_noise_diff((tmp_path / "k4.csv").read_bytes(),
                                                        (GOLDEN / "scores.csv").read_bytes(), FLOAT32_FEATURE_NOISE))


def test_float_noise_is_all_the_comparison_forgives() -> None:
    stored = b"encoder,llm,ravel\nclip,Qwen3-1.7B,0.6399206025704067\n"
    assert float_noise_diff(b"encoder,llm,ravel\nclip,Qwen3-1.7B,0.6399206025704066\n", stored) is None
    assert "beyond float noise" in str(float_noise_diff(b"encoder,llm,ravel\nclip,Qwen3-1.7B,0.63992061\n", stored))
    assert float_noise_diff(b"encoder,llm,ravel\nsiglip,Qwen3-1.7B,0.6399206025704067\n", stored) is not None
    assert float_noise_diff(b"encoder,llm,ravel\n", stored) is not None


def test_the_stored_table1_holds_the_published_correlations() -> None:
    text = (GOLDEN / "table1.csv").read_text()
    rows = {line.split(",")[0]: line.split(",") for line in text.splitlines()[1:]}
    assert [round(float(rows[m][2]), 3) for m in ("Qwen3-1.7B", "Qwen2.5-1.5B", "SmolLM2-1.7B")] == [0.569, 0.635, 0.670]
    assert [round(float(rows[m][3]), 3) for m in ("Qwen3-1.7B", "Qwen2.5-1.5B", "SmolLM2-1.7B")] == [0.618, 0.640, 0.711]


def test_scores_read_back_from_the_feature_cache_are_byte_identical_to_the_first_runs(outputs: dict[str, bytes], folder: Path) -> None:
    from mmbench.cli import main

    tiny = folder / "tiny"
    packs = sorted((folder / "cache").rglob("*.npz"))
    assert len(packs) >= 4  # three encoders and one language model wrote theirs
    argv = ["ravel", "score", "--manifest", str(folder / "cal.jsonl"), "--cache-dir", str(folder / "cache"),
            "--encoder", f"clip={tiny / 'clip'}", "--encoder", f"siglip={tiny / 'siglip'}",
            "--encoder", f"dinov2reg={tiny / 'dinov2reg'}", "--llm", f"Qwen3-1.7B={tiny / 'llm'}",
            "--k", "5", "--methods", "all", "--out", str(folder / "again.csv")]
    assert main(argv) == 0
    assert sorted((folder / "cache").rglob("*.npz")) == packs  # every feature came from the cache
    assert (folder / "again.csv").read_bytes() == outputs["scores.csv"]  # same machine: same bytes
