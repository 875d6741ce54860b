"""`mmbench export --format mteb`: the folder loads through mteb's own retrieval loader and holds
the same data as the in-memory mteb task; targets are never clobbered."""
from __future__ import annotations

import json

import pytest

from mmbench.cli import main

mteb = pytest.importorskip("mteb")


def _loaded_by_mteb(folder, in_memory):
    """An mteb task whose metadata points at the export folder, loaded by mteb's default load_data."""
    from mteb.abstasks.retrieval import AbsTaskRetrieval

    class FromFolder(AbsTaskRetrieval):
        metadata = in_memory.metadata.model_copy(update={"dataset": {"path": str(folder), "revision": "local"}})

    task = FromFolder()
    task.load_data()   # RetrievalDatasetLoader -> datasets.load_dataset(folder, config, split=...)
    return task


def _plain(split_data):
    """The rows by pool-set id: an exported folder holds one copy of a candidate per pool (`<no>.<key>~<id>`)."""
    from mmbench.interop.mteb_task import candidate_of

    return {"corpus": sorted({(candidate_of(r["id"]), r["text"]) for r in split_data["corpus"]}),
            "queries": sorted((r["id"], r["text"]) for r in split_data["queries"]),
            "qrels": {q: {candidate_of(c): s for c, s in v.items()} for q, v in split_data["relevant_docs"].items()},
            "top_ranked": {q: [candidate_of(c) for c in v] for q, v in (split_data["top_ranked"] or {}).items()}}


def test_export_loads_through_mtebs_loader_with_the_same_data(vg_tiny, tmp_path, capsys):
    from mmbench.interop.mteb_task import export_mteb_task

    out = tmp_path / "exported"
    assert main(["export", "--format", "mteb", str(vg_tiny), "--out", str(out)]) == 0
    assert "60 queries, 600 corpus rows, 60 qrels" in capsys.readouterr().out   # a copy per pool and candidate
    reference = export_mteb_task(vg_tiny)
    reference.load_data()
    loaded = _loaded_by_mteb(out, reference)
    assert set(loaded.dataset) == set(reference.dataset)
    for subset, splits in reference.dataset.items():
        for split, data in splits.items():
            assert _plain(loaded.dataset[subset][split]) == _plain(data), (subset, split)
            assert all(len(v) == 10 for v in data["top_ranked"].values())   # each query keeps its own pool
    assert sum(len(d["top_ranked"]) for sp in reference.dataset.values() for d in sp.values()) == 60
    summary = json.loads((out / "mteb_export.json").read_text())
    manifest = json.loads((vg_tiny / "manifest.json").read_text())
    assert summary["source"]["content_hash"] == manifest["content_hash"]
    assert summary["task"] == reference.metadata.name and summary["main_score"] == reference.metadata.main_score


def test_export_never_clobbers(vg_tiny, tmp_path, capsys):
    out = tmp_path / "exported"
    assert main(["export", str(vg_tiny), "--out", str(out)]) == 0
    assert main(["export", str(vg_tiny), "--out", str(out)]) == 2
    assert "pass --overwrite" in capsys.readouterr().err
    assert main(["export", str(vg_tiny), "--out", str(out), "--overwrite"]) == 0
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    assert main(["export", str(vg_tiny), "--out", str(mine), "--overwrite"]) == 2
    assert "is not an mmbench export" in capsys.readouterr().err
    assert (mine / "notes.txt").read_text() == "keep me" and sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]   # no temporary folder left behind
    assert main(["export", str(tmp_path / "nowhere"), "--out", str(tmp_path / "x")]) == 2


def test_several_images_per_document_are_refused_unless_the_loss_is_accepted(vg_small, tmp_path, capsys):
    """An mteb row holds one image: a pool set whose documents hold more is refused in one line naming the task
    and the counts, and nothing is written; --accept-image-loss exports it and records the loss."""
    from mmbench.data.documents import Image
    from mmbench.data.poolset import load_poolset

    ps = load_poolset(vg_small)
    counts = [sum(isinstance(s, Image) for s in d.segments) for d in [*ps.queries, *ps.candidates]]
    several = sum(n > 1 for n in counts)
    lost = sum(n - 1 for n in counts if n > 1)
    assert several > 0 and lost > several   # what the sample really holds, counted here from the documents
    out = tmp_path / "exported"
    assert main(["export", str(vg_small), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert f"visual_grounding: {several} documents hold more than one image" in err
    assert f"so {lost} images would be lost" in err and "--accept-image-loss" in err
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert main(["export", str(vg_small), "--out", str(out), "--accept-image-loss"]) == 0
    assert f"{lost} further images of {several} documents" in capsys.readouterr().out
    loss = json.loads((out / "mteb_export.json").read_text())["image_loss"]
    assert (loss["accepted"], loss["documents"], loss["dropped_images"]) == (True, several, lost)
    multi = {d.id for d, n in zip([*ps.queries, *ps.candidates], counts) if n > 1}
    assert set(loss["document_ids"]) == multi


def test_a_pool_set_of_single_images_needs_no_opt_in(vg_tiny, tmp_path):
    out = tmp_path / "exported"
    assert main(["export", str(vg_tiny), "--out", str(out)]) == 0
    loss = json.loads((out / "mteb_export.json").read_text())["image_loss"]
    assert loss == {"accepted": False, "documents": 0, "dropped_images": 0, "document_ids": []}


def test_export_with_images_resolves_media(vg_small, tmp_path):
    """Image documents: `image` is the first image (decoded by datasets), `media` names every file, copied."""
    import datasets
    from PIL import Image as PILImage

    src = vg_small
    out = tmp_path / "exported"
    assert main(["export", str(src), "--out", str(out), "--accept-image-loss"]) == 0
    summary = json.loads((out / "mteb_export.json").read_text())
    split = sorted(summary["subsets"]["default"])[0]
    corpus = datasets.load_dataset(str(out), "corpus", split=split, cache_dir=str(tmp_path / "hf"))
    row = next(r for r in corpus if json.loads(r["media"]))
    assert isinstance(row["image"], PILImage.Image)
    assert all((out / p).is_file() for r in corpus for p in json.loads(r["media"]))
    first = PILImage.open(out / json.loads(row["media"])[0])
    assert first.size == row["image"].size
    named = {p for part in ("corpus", "queries") for s in summary["subsets"]["default"]
             for r in datasets.load_dataset(str(out), part, split=s, cache_dir=str(tmp_path / "hf"))
             for p in json.loads(r["media"])}
    assert summary["media_files"] == len(named) == len(list((out / "media").rglob("*.*")))


def test_subsets_other_than_default_get_prefixed_configs(vg_tiny, tmp_path, monkeypatch):
    """mteb reads subset X from configs X-corpus, X-queries, X-qrels and X-top_ranked."""
    from mteb.abstasks.retrieval_dataset_loaders import RetrievalDatasetLoader

    from mmbench.interop import mteb_task
    from mmbench.interop.mteb_folder import ExportError, write_mteb_layout
    from mmbench.data.poolset import load_poolset

    real = mteb_task.export_mteb_task

    def two_subsets(names):
        def export(ps, *a, **k):
            task = real(ps, *a, **k)
            task.load_data()
            first = next(iter(task.dataset.values()))
            task.dataset = {n: first for n in names}
            task.load_data = lambda *a, **k: None
            return task
        return export

    ps = load_poolset(vg_tiny)
    monkeypatch.setattr(mteb_task, "export_mteb_task", two_subsets(["en", "text_bg"]))
    write_mteb_layout(ps, tmp_path / "out")
    reference = real(vg_tiny)
    reference.load_data()
    for subset in ("en", "text_bg"):
        for split, data in next(iter(reference.dataset.values())).items():
            got = RetrievalDatasetLoader(str(tmp_path / "out"), revision="local", split=split, config=subset).load()
            assert _plain(got) == _plain(data)
    monkeypatch.setattr(mteb_task, "export_mteb_task", two_subsets(["hotpotqa/easy"]))
    with pytest.raises(ExportError, match="'hotpotqa/easy' holds a character"):
        write_mteb_layout(ps, tmp_path / "bad")
    assert not (tmp_path / "bad").exists()


def test_split_names_datasets_refuses_are_renamed_and_recorded(vg_tiny, tmp_path, monkeypatch):
    from mteb.abstasks.retrieval_dataset_loaders import RetrievalDatasetLoader

    from mmbench.interop import mteb_task
    from mmbench.interop.mteb_folder import write_mteb_layout, written_split_name
    from mmbench.data.poolset import load_poolset

    assert written_split_name("2k") == "2k" and written_split_name("0-1k") == "0_1k"
    real = mteb_task.export_mteb_task

    def dashed(ps, *a, **k):
        task = real(ps, *a, **k)
        task.load_data()
        first = next(iter(next(iter(task.dataset.values())).values()))
        task.dataset = {"default": {"0-256": first}}
        task.load_data = lambda *a, **k: None
        return task

    monkeypatch.setattr(mteb_task, "export_mteb_task", dashed)
    summary = write_mteb_layout(load_poolset(vg_tiny), tmp_path / "out")
    assert summary["renamed_splits"] == {"0-256": "0_256"}
    got = RetrievalDatasetLoader(str(tmp_path / "out"), revision="local", split="0_256").load()
    reference = real(vg_tiny)
    reference.load_data()
    assert _plain(got) == _plain(next(iter(next(iter(reference.dataset.values())).values())))


def test_mteb_evaluate_scores_the_folder_as_the_in_memory_task(vg_tiny, tmp_path):
    """The same encoder through mteb.evaluate: exported folder and in-memory task give the same scores (mteb
    rounds the folder's averages to 5 decimals; the in-memory task reports them unrounded)."""
    import hashlib

    import numpy as np
    from mteb.models.abs_encoder import AbsEncoder
    from mteb.models.model_meta import ModelMeta

    from mmbench.interop.mteb_task import export_mteb_task

    class HashedWords(AbsEncoder):
        def __init__(self):
            self.mteb_model_meta = ModelMeta(
                loader=None, name="local/hashed-words", revision="0", release_date=None, languages=["eng-Latn"],
                n_parameters=0, memory_usage_mb=None, max_tokens=None, embed_dim=128, license=None,
                open_weights=True, public_training_code=None, public_training_data=None, framework=["NumPy"],
                similarity_fn_name="cosine", use_instructions=False, training_datasets=set(), modalities=["text"])

        def encode(self, inputs, **_):
            rows = []
            for batch in inputs:
                for text in batch["text"]:
                    v = np.full(128, 1e-3)
                    for w in text.lower().split():
                        v[int(hashlib.sha256(w.encode()).hexdigest(), 16) % 128] += 1
                    rows.append(v)
            return np.stack(rows)

        def similarity(self, a, b):   # float64 and rounded as mmbench scores, so equal scores are exact ties
            import torch

            a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
            a, b = a / np.linalg.norm(a, axis=1, keepdims=True), b / np.linalg.norm(b, axis=1, keepdims=True)
            return torch.from_numpy(np.round(a @ b.T, 6))

    out = tmp_path / "exported"
    assert main(["export", str(vg_tiny), "--out", str(out)]) == 0
    exported = export_mteb_task(vg_tiny)
    exported.load_data()
    from_folder = _loaded_by_mteb(out, exported)
    # the bridge's in-memory task ranks each pool with mmbench's tie-break; the folder, scored by mteb alone,
    # breaks ties by corpus id, and its ids are written in that same order
    a = mteb.evaluate(HashedWords(), exported, cache=None, show_progress_bar=False).task_results[0].scores
    b = mteb.evaluate(HashedWords(), from_folder, cache=None, show_progress_bar=False).task_results[0].scores
    assert set(a) == set(b) and a
    assert any(0 < s[0]["precision_at_1"] < 1 for s in a.values())   # a real ranking, neither perfect nor empty
    for split in a:
        for key in ("ndcg_at_10", "precision_at_1", "mrr_at_10", "recall_at_5"):
            ours, theirs = a[split][0][key], b[split][0][key]
            assert abs(theirs - ours) <= 1e-6 or abs(theirs - round(ours, 5)) <= 1e-9, (split, key, ours, theirs)
