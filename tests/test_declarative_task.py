"""Declarative tasks (a YAML/TOML task file over local files): built with the common audit and probes, refused when
the sources plant a shortcut, the same pool set from JSONL and from mteb's layout, one-line errors (exit 2) for bad
task files and sources, and `run --log-samples`.

The sources are written by tests/declarative_sources.py: seeded pseudo-prose with topic words the queries repeat, a
PNG on every third document, three length bins.
"""
from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import declarative_sources as ds  # noqa: E402

from mmbench.cli import main  # noqa: E402
from mmbench.data.poolset import load_poolset  # noqa: E402


def _task(folder: Path, text: str, name: str = "task.yaml") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The JSONL task (text and images, three bins, BM25 look-alike distractors), built once by the CLI."""
    root = tmp_path_factory.mktemp("declarative")
    written = ds.write_jsonl_sources(root / "data")
    task = _task(root, ds.task_yaml())
    assert main(["build", "--task-file", str(task), "--out", str(root / "pools")]) == 0
    return root, written, load_poolset(root / "pools", verify=True)


def test_the_shipped_schema_is_a_valid_json_schema():
    import jsonschema

    from mmbench.builders.parts.task_file import task_file_schema

    jsonschema.Draft202012Validator.check_schema(task_file_schema())


def test_jsonl_task_with_images_builds_in_three_bins_with_bm25_lookalikes_and_passes_its_audit(built):
    root, written, ps = built
    m = ps.manifest
    assert m["validity"]["ok"] and m["validity"]["violations"] == 0
    assert {"length_in_bin", "pool_in_bin", "pool_size", "relevant_declared", "shortcut_probe", "label_blind",
            "pool_order_blind"} <= set(m["validity"]["invariants"])
    assert m["validity"]["leak_audit"]["shortcut_probe"]     # the probe ran and is recorded
    assert {p.subset for p in ps.pools} == set(ds.BINS)
    assert m["counts"]["media_files"] > 0 and any(d.media_refs() for d in ps.candidates)
    for c in ps.candidates:
        lo, hi = ds.BINS[c.meta["length_bin"]]
        assert lo < c.tokens <= hi
    assert all(len(p.candidate_ids) == 6 for p in ps.pools)
    # the task file is recorded verbatim: the build is reproducible from it and the sources
    assert m["builder"]["task_file"]["text"] == (root / "task.yaml").read_text(encoding="utf-8")
    assert m["builder"]["distractors"] == "bm25"
    # BM25 look-alikes: each pool holds the bin's documents BM25 ranks highest for its query (those it scores > 0)
    from mmbench.builders.parts.lookalikes import LookalikeIndex

    texts = {d["id"]: " ".join(s["text"] for s in d["segments"] if "text" in s) for d in written["documents"]}
    built_id = {c.id: c.meta["provenance"]["built_id"][2:] for c in ps.candidates}
    queries = {q.id: q for q in ps.queries}
    checked = 0
    for item in ps.pools[:6]:
        members = sorted(i for i in texts if i.startswith(item.subset))
        index = LookalikeIndex(members, [texts[i] for i in members])
        rel = [built_id[r] for r in item.relevant_ids]
        near = [la.doc_id for la in index.nearest(queries[item.query_id].text, 5, exclude=rel) if la.score > 0]
        assert set(near) <= {built_id[c] for c in item.candidate_ids}
        checked += bool(near)
    assert checked


def test_rebuilding_from_the_recorded_task_file_gives_the_same_hash(built, tmp_path):
    from mmbench.builders.declarative import build

    root, _, ps = built
    record = ps.manifest["builder"]["task_file"]
    again = build("files", tmp_path / "again", seed=0, task_file=str(root / "task.yaml"), task_text=record["text"],
                  progress=False)
    assert again.manifest["content_hash"] == ps.manifest["content_hash"]


def test_the_same_task_from_mteb_layout_gives_the_same_pool_set_hash(built, tmp_path):
    root, written, ps = built
    ds.write_mteb_layout(tmp_path / "mteb", written, root / "data")
    task = _task(tmp_path, ds.task_yaml(sources="  format: mteb\n  folder: mteb\n"))
    assert main(["build", "--task-file", str(task), "--out", str(tmp_path / "pools")]) == 0
    assert load_poolset(tmp_path / "pools").manifest["content_hash"] == ps.manifest["content_hash"]


SHORTCUT_LINES = {"longest": r"label_blind: baseline length_longest|shortcut_probe: shortcut probe",
                  "shortest": r"label_blind: baseline length_shortest|shortcut_probe: shortcut probe",
                  "image": r"label_blind: baseline \w+|shortcut_probe: shortcut probe"}


@pytest.mark.parametrize("plant", ds.PLANTS)
def test_a_shortcut_planted_in_the_sources_is_refused_naming_the_probe(plant, tmp_path, capsys):
    """Relevant documents always the longest (the issue's case), always the shortest, or the only ones with an
    image: the build refuses, naming the probe or the label-blind baseline that found it, and writes nothing."""
    ds.write_jsonl_sources(tmp_path / "data", per_bin=40, queries_per_bin=14, plant=plant, seed=2)
    task = _task(tmp_path, ds.task_yaml(distractors="same_bin", pool_size=4))
    assert main(["build", "--task-file", str(task), "--out", str(tmp_path / "pools")]) != 0
    err = capsys.readouterr().err
    assert "refusing to write an invalid my_files pool set" in err
    assert re.search(SHORTCUT_LINES[plant], err), err
    assert not (tmp_path / "pools").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "task.yaml"]   # nothing half-built


# ---- malformed task files and sources: one line naming file, record and field, exit 2 ----------------------------

def _doc_lines(rows):
    return "".join(json.dumps(r) + "\n" for r in rows)


def _small(folder: Path, docs=None, queries=None, extra_files=()):
    data = folder / "data"
    data.mkdir(parents=True, exist_ok=True)
    docs = docs if docs is not None else [{"id": f"d{i}", "text": f"document {i} " * (3 + i)} for i in range(8)]
    queries = queries if queries is not None else [{"id": "q0", "text": "document zero", "relevant": ["d0"]}]
    (data / "docs.jsonl").write_text(docs if isinstance(docs, str) else _doc_lines(docs), encoding="utf-8")
    (data / "queries.jsonl").write_text(_doc_lines(queries), encoding="utf-8")
    return folder


GOOD = ("name: small\nsources: {format: jsonl, documents: data/docs.jsonl, queries: data/queries.jsonl}\n"
        "design:\n  length_bins: {all: [0, 4096]}\n  pool_size: 4\n")

MALFORMED = {
    # id: (task file text, documents (None: 8 good ones), queries (None: one good one), what the line names)
    "unknown design field": (GOOD + "  pool_sise: 4\n", None, None, r"task\.yaml: design\.pool_sise: not a field"),
    "wrong type": (GOOD.replace("pool_size: 4", "pool_size: eight"), None, None, r"task\.yaml: design\.pool_size: "),
    "unknown distractor policy": (GOOD + "  distractors: random\n", None, None, r"task\.yaml: design\.distractors: "),
    "unknown layout": (GOOD.replace("format: jsonl", "format: csv"), None, None, r"task\.yaml: sources\.format: "),
    "missing name": (GOOD.replace("name: small\n", ""), None, None, r"task\.yaml: name: missing"),
    "overlapping bins": (GOOD.replace("{all: [0, 4096]}", "{a: [0, 100], b: [50, 4096]}"), None, None,
                         r"task\.yaml: design\.length_bins\.b: .*overlaps a"),
    "not YAML": ("name: [unclosed\n", None, None, r"task\.yaml:\d+: not valid YAML"),
    "missing media file": (GOOD, [{"id": "d0", "segments": [{"text": "x"}, {"image": "img/none.png"}]}], None,
                           r"docs\.jsonl:1: field 'segments\[1\]\.image': no such file"),
    "relevant id that does not exist": (GOOD, None, [{"id": "q0", "text": "zero", "relevant": ["d99"]}],
                                        r"queries\.jsonl:1: field 'relevant': document 'd99' is not in the documents"),
    "bin with too few documents": (GOOD.replace("pool_size: 4", "pool_size: 12"), None, None,
                                   r"task\.yaml: design\.length_bins\.all: 8 documents .* at least 12"),
    "pools that could not be filled": (GOOD + "  min_documents_per_bin: 2\n", None, None,
                                       r"task\.yaml: design\.min_documents_per_bin: 2 is below pool_size 4"),
    "mteb folder missing": (GOOD.replace("{format: jsonl, documents: data/docs.jsonl, queries: data/queries.jsonl}",
                                         "{format: mteb, folder: nowhere}"), None, None,
                            r"nowhere: sources\.folder: no such folder"),
    "jsonl field in an mteb source": (GOOD.replace("format: jsonl", "format: mteb"), None, None,
                                      r"task\.yaml: sources\.(documents|queries|folder): "),
    "invalid JSON line": (GOOD, "{\"id\": \"d0\", \"text\": \"a\"}\n{not json\n", None, r"docs\.jsonl:2: invalid JSON"),
    "duplicate document id": (GOOD, [{"id": "d0", "text": "a b"}, {"id": "d0", "text": "c d"}], None,
                              r"docs\.jsonl:2: field 'id': document id 'd0' already used at .*docs\.jsonl:1"),
    "unknown record field": (GOOD, [{"id": "d0", "txt": "a b"}], None, r"docs\.jsonl:1: field 'txt': not a field"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_task_file_or_source_is_one_line_exit_2_and_builds_nothing(case, tmp_path, capsys):
    text, docs, queries, expected = MALFORMED[case]
    _small(tmp_path, docs, queries)
    task = _task(tmp_path, text)
    assert main(["build", "--task-file", str(task), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert re.search(expected, lines[0]), lines[0]
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]   # no scratch left behind


def test_validate_reads_a_declarative_pool_set_without_its_task_file(built, capsys, monkeypatch):
    import mmbench.tasks as registry

    root, _, _ = built
    monkeypatch.delitem(registry._TASKS, "my_files", raising=False)   # unknown here: the manifest names its checks
    assert main(["validate", str(root / "pools")]) == 0
    out = capsys.readouterr().out
    assert "ok   relevant_declared" in out and "is valid" in out


def test_a_task_file_by_include_registers_its_task_and_a_python_file_still_imports(built, tmp_path, capsys):
    root, _, _ = built
    assert main(["list", "tasks", "--include", str(root / "task.yaml")]) == 0
    assert "my_files  v1  sources: files  length bins: short,medium,long" in capsys.readouterr().out


# ---- logged samples ------------------------------------------------------------------------------------------------

def test_log_samples_has_one_line_per_item_and_round_trips_to_the_per_query_table(built, tmp_path, monkeypatch):
    from mmbench.results.samples import SAMPLES, per_query_rows
    from mmbench.results.store import load_results

    root, _, ps = built
    monkeypatch.setenv("MMBENCH_HOME", str(tmp_path / "home"))
    out = tmp_path / "runs" / "bm25"
    assert main(["run", "--include", str(root / "task.yaml"), "--task", "my_files", "--data", str(root / "pools"),
                 "--model", "bm25", "--output", str(out), "--quiet", "--log-samples"]) == 0
    path = out / SAMPLES
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]  # plain json, no pandas
    assert len(lines) == len(ps.pools)
    table = load_results(out).per_query
    assert len(table) == len(lines)
    rows = per_query_rows(path)
    assert [r["item_id"] for r in rows] == list(table["item_id"])
    for row, (_, want) in zip(rows, table.iterrows()):
        assert set(row) == set(table.columns)
        for col in table.columns:
            got, exp = row[col], want[col]
            exp = exp.tolist() if hasattr(exp, "tolist") else exp
            if isinstance(exp, float) and math.isnan(exp):
                assert got is None
            else:
                assert got == exp, (col, got, exp)
    first = lines[0]
    assert first["query"]["text"] and first["ranked_ids"][0] in first["seen"] and first["query_id"] in first["seen"]
    assert {"seen_tokens", "truncated", "unseen_modalities"} <= set(first["seen"][first["query_id"]])
    assert any(s["unseen_modalities"] == ["image"] for line in lines for s in line["seen"].values())
    # boards take the run as it is (samples.jsonl beside it), on a private registry of the task's pool set
    registry = tmp_path / "official.json"
    assert main(["leaderboard", "official", str(root / "pools"), "--write", str(registry)]) == 0
    assert main(["leaderboard", "submit", str(out), "--board", str(tmp_path / "board"), "--official", str(registry)]) == 0


# ---- needle-style: depth placement, and each invariant failing on a broken record ---------------------------------

def _needle_sources(folder: Path) -> Path:
    import numpy as np

    rng = np.random.default_rng(0)
    vocab = ds._words(300, rng)
    docs, queries = [], []
    for i in range(10):
        docs.append({"id": f"needle-{i}", "text": f"The password of the {vocab[200 + i]} vault is {vocab[250 + i]}."})
        queries.append({"id": f"q{i}", "text": f"What is the password of the {vocab[200 + i]} vault?",
                        "relevant": [f"needle-{i}"]})
    for b, (lo, hi) in {"short": (30, 50), "long": (150, 200)}.items():
        for j in range(8):
            sents = [" ".join(rng.choice(vocab[:150], size=8)).capitalize() + "." for _ in range(int(rng.integers(lo, hi)) // 8)]
            docs.append({"id": f"hay-{b}-{j}", "text": " ".join(sents)})
    _small(folder, docs, queries)
    return _task(folder, "name: needles\nsources: {format: jsonl, documents: data/docs.jsonl, queries: data/queries.jsonl}\n"
                         "design:\n  length_bins: {short: [0, 200], long: [200, 1024]}\n  pool_size: 4\n"
                         "  depth: {depths: [0.0, 0.5, 1.0]}\n")


def test_needle_style_depth_placement_and_each_invariant_fails_on_a_broken_record(tmp_path):
    from mmbench.builders.checks import declarative as checks
    from mmbench.builders.declarative import build
    from mmbench.builders.parts.validity import validate

    task = _needle_sources(tmp_path)
    ps = build("files", tmp_path / "pools", task_file=str(task), progress=False)
    ps = load_poolset(tmp_path / "pools")
    assert {p.meta["depth_target"] for p in ps.pools} == {0.0, 0.5, 1.0}
    cands = ps.candidate_by_id()
    for item in ps.pools:
        rel = cands[item.relevant_ids[0]]
        assert abs(rel.meta["depth"] - item.meta["depth_target"]) <= 0.5
        assert all("@" in cands[c].meta["provenance"]["built_id"] for c in item.candidate_ids)  # every one holds a needle
    at_start = next(p for p in ps.pools if p.meta["depth_target"] == 0.0)
    assert cands[at_start.relevant_ids[0]].meta["depth"] == 0.0
    assert validate(ps, checks).ok
    long_one = next(c for c in ps.candidates if c.meta["length_bin"] == "long")
    long_one.meta["length_bin"] = "short"                                    # length_in_bin and pool_in_bin
    item = ps.pools[0]
    item.relevant_ids = [next(c for c in item.candidate_ids if c not in item.relevant_ids)]   # relevant_declared
    ps.pools[1].candidate_ids = ps.pools[1].candidate_ids[:3]                                  # pool_size
    cands[ps.pools[2].candidate_ids[0]].meta["depth_target"] = 0.25                            # depth_recorded
    broken = {v.invariant for v in validate(ps, checks).violations}
    assert {"length_in_bin", "pool_in_bin", "relevant_declared", "pool_size", "depth_recorded"} <= broken, broken


def test_a_toml_task_file_reads_like_the_yaml_one(tmp_path):
    from mmbench.builders.parts.task_file import read_task_file

    yaml_file = _task(tmp_path, GOOD)
    toml_file = _task(tmp_path, 'name = "small"\n[sources]\nformat = "jsonl"\ndocuments = "data/docs.jsonl"\n'
                                'queries = "data/queries.jsonl"\n[design]\npool_size = 4\n'
                                '[design.length_bins]\nall = [0, 4096]\n', "task.toml")
    assert read_task_file(yaml_file).data == read_task_file(toml_file).data
