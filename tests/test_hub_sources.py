"""Real sources named on the hub (`hf:<id>@<revision>`), read from local folders in the hub's layout
(README.md `configs:` + `<config>/<split>-00000-of-00001.parquet`); no network."""
from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mmbench.builders.sources import hub
from mmbench.builders.sources import sample_reasoning as sr
from mmbench.builders.sources.govreport import govreport_fingerprint, read_govreport
from mmbench.builders.sources.sample_reports import pydoc_reports

pytest.importorskip("datasets")
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _hub_layout(rec: dict) -> dict:
    """A HotpotQA record as hotpotqa/hotpot_qa's parquet holds it (the original JSON's lists as columns)."""
    return {"id": rec["_id"], "question": rec["question"], "answer": rec["answer"], "type": rec["type"],
            "level": rec["level"],
            "supporting_facts": {"title": [t for t, _ in rec["supporting_facts"]],
                                 "sent_id": [i for _, i in rec["supporting_facts"]]},
            "context": {"title": [t for t, _ in rec["context"]], "sentences": [s for _, s in rec["context"]]}}


def _hotpot_repo(root, records, row_group_size=None):
    (root / "distractor").mkdir(parents=True)
    (root / "README.md").write_text(
        "---\nlicense: cc-by-sa-4.0\nconfigs:\n- config_name: distractor\n  data_files:\n  - split: validation\n"
        "    path: distractor/validation-*.parquet\n---\n")
    pq.write_table(pa.Table.from_pylist([_hub_layout(r) for r in records]),
                   root / "distractor" / "validation-00000-of-00001.parquet", row_group_size=row_group_size)
    return root


@pytest.fixture(autouse=True)
def _fresh(monkeypatch, tmp_path):
    hub._load.cache_clear()
    hub._digest.cache_clear()
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    import datasets.config

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")
    yield
    hub._load.cache_clear()
    hub._digest.cache_clear()


def test_parse_names_and_errors():
    spec = hub.parse(f"hf:hotpotqa/hotpot_qa@{COMMIT}?split=train", "hotpotqa", config="distractor", split="validation")
    assert spec == hub.HubSpec("hotpotqa/hotpot_qa", COMMIT, "distractor", "train")
    assert str(spec) == f"hf:hotpotqa/hotpot_qa@{COMMIT}?config=distractor&split=train"
    with pytest.raises(ValueError, match=r"^hotpotqa='hf:hotpotqa/hotpot_qa': name the revision"):
        hub.parse("hf:hotpotqa/hotpot_qa", "hotpotqa")
    with pytest.raises(ValueError, match=r"unknown option 'subset'"):
        hub.parse(f"hf:a/b@{COMMIT}?subset=x", "hotpotqa")
    with pytest.raises(ValueError, match=r"expected hf:<dataset id>@<revision>"):
        hub.parse("hf:", "hotpotqa")
    assert not hub.is_hub("/data/hotpot.json") and hub.is_hub("hf:a/b@c")


def test_msr_build_from_the_hub_pins_the_revision_and_equals_the_local_build(tmp_path, monkeypatch):
    from mmbench.tasks import get_task

    records = sr.hotpot_records(9, 7)
    repo = _hotpot_repo(tmp_path / "repo", records)
    asked = []
    real = hub.load_dataset

    def offline_hub(spec):   # stands in for the hub: the same dataset id resolves to the local folder
        asked.append(spec)
        assert spec.dataset == "hotpotqa/hotpot_qa"
        return real(hub.HubSpec(str(repo), spec.revision, spec.config, spec.split))

    monkeypatch.setattr(hub, "load_dataset", offline_hub)
    card = hub.card_licence
    monkeypatch.setattr(hub, "card_licence", lambda spec: card(hub.HubSpec(str(repo), spec.revision)))
    params = dict(seed=0, lengths=(2048,), queries_per_dataset=4, candidates_per_query=4, datasets=("hotpotqa",),
                  progress=False)
    task = get_task("multi_source_reasoning")
    ps = task.build("real", tmp_path / "from_hub", hotpotqa=f"hf:hotpotqa/hotpot_qa@{COMMIT}", **params)
    assert asked == [hub.HubSpec("hotpotqa/hotpot_qa", COMMIT, "distractor", "validation")]  # loaded once, pinned
    fp = ps.sources["hotpotqa"]
    assert fp.startswith(f"hf:hotpotqa/hotpot_qa@{COMMIT}?config=distractor&split=validation rows=7 sha256:")
    assert fp.endswith(" license=cc-by-sa-4.0")
    manifest = json.loads((tmp_path / "from_hub" / "manifest.json").read_text())
    assert manifest["sources"]["hotpotqa"] == fp and manifest["validity"]["ok"]
    assert "cc-by-sa-4.0" in (tmp_path / "from_hub" / "README.md").read_text()   # the card names the licence

    local = tmp_path / "hotpot.json"
    local.write_text(json.dumps(records))
    ps_local = task.build("real", tmp_path / "from_file", hotpotqa=str(local), **params)
    assert ps_local.content_hash == ps.content_hash   # same records, same pool set, wherever they came from


def test_fingerprint_is_a_digest_of_the_rows_not_of_the_files(tmp_path):
    records = sr.hotpot_records(3, 5)
    a = _hotpot_repo(tmp_path / "a", records)
    b = _hotpot_repo(tmp_path / "b", records, row_group_size=1)    # other file bytes, same rows
    c = _hotpot_repo(tmp_path / "c", records[:4])
    fa, fb, fc = (hub.fingerprint(f"hf:{r}@{COMMIT}", "hotpotqa", config="distractor", split="validation")
                  for r in (a, b, c))
    digest = lambda f: f.split(" sha256:")[1].split()[0]  # noqa: E731
    assert digest(fa) == digest(fb) != digest(fc)
    assert " rows=5 " in fa and " rows=4 " in fc and fa.endswith("license=cc-by-sa-4.0")


def test_govreport_from_a_hub_folder_reads_like_the_parquet(tmp_path, capsys):
    rows = [{"id": r.id, "report": r.text, "summary": r.summary} for r in pydoc_reports()[:6]]
    repo = tmp_path / "gov"
    (repo / "data").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), repo / "data" / "test-00000-of-00001.parquet")  # no card: default layout
    local = tmp_path / "gov.parquet"
    pq.write_table(pa.Table.from_pylist(rows), local)
    name = f"hf:{repo}@v1"
    assert read_govreport(name) == read_govreport(local)
    assert "not a commit hash" in capsys.readouterr().err   # a branch or tag is said to be unpinned
    fp = govreport_fingerprint(name)
    assert fp.startswith(f"hf:{repo}@v1?split=test rows=6 sha256:") and fp.endswith("license=unknown")
    with pytest.raises(ValueError, match=r"^govreport='hf:x/y': name the revision"):
        read_govreport("hf:x/y")
    with pytest.raises(ValueError, match=r"split=nosuch: could not load it through datasets"):
        read_govreport(f"hf:{repo}@v1?split=nosuch")


def test_flickr_hf_source_pins_the_revision(tmp_path):
    from mmbench.builders.flickr_hard_negatives import load_source
    from mmbench.builders.sources.flickr30k import read_hf
    from mmbench.builders.sources.sample_flickr import sample_flickr

    recs = sample_flickr(4, 0)
    table = pa.table({"image": [{"bytes": r.read()[0], "path": f"{r.image_id}.jpg"} for r in recs],
                      "caption": [list(r.captions) for r in recs], "filename": [f"{r.image_id}.jpg" for r in recs]})
    (tmp_path / "flickr" / "data").mkdir(parents=True)
    pq.write_table(table, tmp_path / "flickr" / "data" / "test-00000-of-00001.parquet")
    got = read_hf(f"hf:{tmp_path / 'flickr'}@{COMMIT}", hf_split="test")
    assert [(r.image_id, r.captions, r.read()[0]) for r in got] == [(r.image_id, r.captions, r.read()[0]) for r in recs]
    _, sources = load_source("hf", 0, f"hf:{tmp_path / 'flickr'}@{COMMIT}", None, None, None, "test", 0)
    assert sources["dataset"].startswith(f"hf:{tmp_path / 'flickr'}@{COMMIT}?split=test rows=4 sha256:")


def test_needlebench_from_a_hub_folder_reads_like_the_jsonl(tmp_path):
    """opencompass/NeedleBench's layout: config retrieval_needles = needles.jsonl (split test). Fields a line
    lacks stay absent (datasets fills them with None), so defaults apply as for the file."""
    from mmbench.builders.sources.needles import needlebench_fingerprint, read_needlebench

    lines = [{"id": "n1", "needle": "Hidden on the Moon is a violet kettle.", "language": "English",
              "retrieval_question": "What is hidden on the Moon? Please answer in the format 'X'.", "arg2": "kettle"},
             {"needle": "月亮上藏着一个水壶。", "retrieval_question": "月亮上藏着什么？", "language": "Chinese", "arg2": "水壶"},
             {"needle": "The lighthouse keeper's cat is named Pluto.", "retrieval_question": "What is the cat called?"}]
    repo = tmp_path / "NeedleBench"
    repo.mkdir()
    (repo / "needles.jsonl").write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines))
    (repo / "README.md").write_text("---\nlicense: mit\nconfigs:\n- config_name: retrieval_needles\n  data_files:\n"
                                    "  - split: test\n    path:\n    - needles.jsonl\n---\n")
    name = f"hf:{repo}@{COMMIT}"
    key = lambda recs: [(r.id, r.needle, r.question, r.answer) for r in recs]  # noqa: E731
    local = read_needlebench(repo / "needles.jsonl")
    assert key(read_needlebench(name)) == key(local) and [r.id for r in local] == ["n1", "nb3"]
    fp = needlebench_fingerprint(name)
    assert fp.startswith(f"{name}?config=retrieval_needles&split=test rows=3 sha256:") and fp.endswith("license=mit")
