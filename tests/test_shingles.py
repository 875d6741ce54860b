"""Shingle codes are stable and exact in practice: the same in every process, and collision-free on built pools.

`builders/checks/shingles.py` codes a word shingle from BLAKE2b word numbers (never Python's string hash). Before,
the medoid numbered words in `set()` order and dropped each code's low bit, so its figures (and Logical
Summarization's `hard_family_no_centre`) changed with PYTHONHASHSEED.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np

from mmbench.builders.checks import pool_aware
from mmbench.builders.checks.shingles import ShingleCoder, distinct
from mmbench.data.documents import Text
from mmbench.data.poolset import load_poolset
from mmbench.tasks import get_task

SMALL = {"multi_source_reasoning": dict(lengths=(2048,), queries_per_dataset=4, candidates_per_query=4),
         "logical_summarization": dict(lengths=(2048,), queries_per_dataset=4, candidates_per_query=4, lookalikes=2)}

_FIGURES = textwrap.dedent("""
    import hashlib, json, sys
    from mmbench.builders.checks import pool_aware, probe_features
    from mmbench.builders.checks.shingles import ShingleCoder
    from mmbench.data.poolset import load_poolset
    from mmbench.tasks import get_task
    from mmbench.tasks.validation import validate
    out, small = sys.argv[1], json.loads(sys.argv[2])
    figures = {"codes": [int(c) for c in ShingleCoder(5).codes("the cat sat on the mat again".split())]}
    for task, params in sorted(small.items()):
        get_task(task).build("sample", f"{out}/{task}", seed=0, progress=False, **params)
        manifest = json.load(open(f"{out}/{task}/manifest.json"))
        ps = load_poolset(f"{out}/{task}")
        X = probe_features.pool_rows(ps, ps.provenance_columns)[0]
        figures[task] = {"content_hash": manifest["content_hash"], "built": manifest["validity"],
                         "validated": validate(ps).to_dict(), "medoid": pool_aware.medoid_scores(ps),
                         "probe_features": hashlib.sha256(X.tobytes()).hexdigest()}
    print(json.dumps(figures, sort_keys=True))
""")


def test_every_validity_figure_is_the_same_under_three_hash_seeds(tmp_path):
    """A reduced Logical Summarization build (Hard families: medoid, hard_family_no_centre, probe) and a reduced
    Multi-Source Reasoning build, each built and validated in a fresh process under PYTHONHASHSEED 0, 1 and 127:
    the content hash, every figure of the validity report, the unrounded medoid scores and the probe's feature matrix
    are identical. Failed before the stable codes (the medoid's summed Jaccard values moved with the hash seed)."""
    got = {}
    for seed in ("0", "1", "127"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        run = subprocess.run([sys.executable, "-c", _FIGURES, str(tmp_path / seed), json.dumps(SMALL)], env=env,
                             capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr[-2000:]
        got[seed] = json.loads(run.stdout.splitlines()[-1])
    assert got["0"] == got["1"] == got["127"]
    assert got["0"]["logical_summarization"]["validated"]["checked"]["hard_family_no_centre"] > 0


def test_codes_have_no_collision_on_built_pools(tmp_path):
    """Every distinct word shingle (exact tuple) of a reduced Logical Summarization build's candidates gets its own
    code, and equal shingles equal codes: the number of distinct codes is the number of distinct tuples, and each
    code maps to one tuple."""
    out = tmp_path / "ls"
    get_task("logical_summarization").build("sample", out, seed=3, progress=False, **SMALL["logical_summarization"])
    ps = load_poolset(out)
    coder = ShingleCoder(pool_aware.SHINGLE_WORDS)
    seen: dict[int, tuple[str, ...]] = {}
    tuples = 0
    for doc in ps.candidates:
        for s in doc.segments:
            if not isinstance(s, Text):
                continue
            words = pool_aware._WORD.findall(s.text.casefold())
            k = min(pool_aware.SHINGLE_WORDS, len(words))
            for i, code in enumerate(coder.codes(words)):
                shingle = tuple(words[i:i + k])
                assert seen.setdefault(int(code), shingle) == shingle, "two shingles share a code"
                tuples += 1
    assert len(seen) > 1000 and tuples > len(seen)
    assert len(distinct(np.array(list(seen), dtype=np.uint64))) == len(seen)


def test_a_short_segment_and_a_media_ref_get_their_own_codes():
    coder = ShingleCoder(5)
    assert len(coder.codes([])) == 0
    assert list(coder.codes(["a", "b"])) != list(coder.codes(["b", "a"]))
    assert coder.media("a") != int(coder.codes(["a"])[0])
    assert list(coder.codes("one two three four five six".split())) == \
        [coder.codes("one two three four five".split())[0], coder.codes("two three four five six".split())[0]]
