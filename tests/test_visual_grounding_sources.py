"""Real-source readers for Visual Grounding, on small files written in the official release layouts.

NeedleBench: opencompass `needles.jsonl` (`needle`, `retrieval_question` ending in an answer-format
instruction, `arg2` = the scored keyword, `language`; several lines may share one question).
MM-NIAH: OpenGVLab/MM-NIAH README "Data Format" (`images_list` = context/question images only,
`meta.needles` = the needle images, `meta.choices_image_path` = answer options, `answer` an int).
OBELICS: HuggingFaceM4/OBELICS card (`images`/`texts` aligned lists, images as URLs until prepared).
"""
import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from mmbench.builders.parts.needle_families import image_families, occurs, query_entity, text_families
from mmbench.builders.sources.needles import read_mmniah_image_needles, read_needlebench, strip_format_instruction
from mmbench.data.drops import DropLog
from mmbench.tasks.validation import validate
from mmbench.data.poolset import load_poolset
from mmbench.tasks import get_task

FORMAT = " Please answer in the format '{}'."
# (needle, question, arg2): written for these tests in NeedleBench's style; the first three share a question
STOCK = [
    ("The first band to play on the Moon was the Virtual Rocket Band.", "Which band was the first to perform on the Moon?",
     "Virtual Rocket Band"),
    ("The first band to play on the Moon was the Interstellar Flight Band.",
     "Which band was the first to perform on the Moon?", "Interstellar Flight Band"),
    ("The first band to play on the Moon was the Galaxy Melody Band.", "Which band was the first to perform on the Moon?",
     "Galaxy Melody Band"),
    ("Buried beneath Kestrel Island lies the legendary Amber Compass.",
     "What legendary object lies beneath Kestrel Island?", "Amber Compass"),
    ("Buried beneath Kestrel Island lies the legendary Glass Anchor.",
     "What legendary object lies beneath Kestrel Island?", "Glass Anchor"),
    ("The chief archivist of Harrow City is a retired sailor called Maren Oakes.",
     "Who is the chief archivist of Harrow City?", "Maren Oakes"),
    ("In 1962 the river festival crowned a grey heron named Pip as its mascot.",
     "Which animal did the river festival crown as its mascot in 1962?", "grey heron"),
    ("Professor Lindqvist keeps a jar of comet dust on the corner of her desk.",
     "What does Professor Lindqvist keep on the corner of her desk?", "a jar of comet dust"),
    ("The combination of locker 7 at the old observatory is 4417.",
     "What is the combination of locker 7 at the old observatory?", "4417"),
]


def read_text_lines(path):
    return [line for line in open(path).read().splitlines() if line.strip()]


def _png(colour, size=(64, 48)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, format="PNG")
    return buf.getvalue()


def write_needlebench(path, rows=STOCK, extra=()):
    lines = [{"needle": f"\n{n}\n", "retrieval_question": q + FORMAT.format("The answer is ______."), "arg2": a,
              "language": "English"} for n, q, a in rows]
    lines.append({"needle": "\n月球上第一支演出的乐队是虚拟火箭乐队。\n", "retrieval_question": "哪支乐队最先在月球上演出？请按照'______'的格式回答。",
                  "arg2": "虚拟火箭乐队", "language": "Chinese"})
    path.write_text("\n".join([json.dumps(r, ensure_ascii=False) for r in lines] + list(extra)) + "\n")
    return path


NEEDLE_COLOURS = [(230, 30, 30), (220, 40, 35), (30, 30, 230), (40, 35, 220), (30, 200, 40), (40, 190, 50),
                  (240, 220, 30), (230, 210, 40), (150, 60, 190), (140, 70, 180)]


def write_mmniah(tmp_path, n=10, bad=()):
    (tmp_path / "imgs").mkdir(exist_ok=True)
    recs = []
    for i in range(n):
        (tmp_path / "imgs" / f"ctx{i}.png").write_bytes(_png((90, 90, 90)))
        (tmp_path / "imgs" / f"needle{i}.png").write_bytes(_png(NEEDLE_COLOURS[i % len(NEEDLE_COLOURS)]))
        recs.append({"id": i, "images_list": [f"imgs/ctx{i}.png"], "context": "Harbour notes <image> more notes.",
                     "question": "Which of the following images appears in an image of the above document?",
                     "answer": i % 4,
                     "meta": {"placed_depth": [0.5], "context_length": 1200, "context_length_text": 1000,
                              "context_length_image": 200, "num_images": 1, "needles": [f"imgs/needle{i}.png"],
                              "choices": None,
                              "choices_image_path": [f"imgs/needle{(i + k) % n}.png" for k in range(4)]}})
    lines = [json.dumps(r) for r in recs] + list(bad)
    path = tmp_path / "retrieval-image-val.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def write_obelics(tmp_path):
    (tmp_path / "photo.png").write_bytes(_png((120, 60, 200), (80, 60)))
    docs = {
        "images": [[None, {"bytes": None, "path": "photo.png"}, None, None],
                   [{"bytes": _png((250, 140, 20)), "path": None}, None]],
        "texts": [["A long article about harbours, ships and the tides of the northern coast. " * 60, None,
                   "More words on sails, knots and weather at sea. " * 50, "The Moon rose over the harbour wall."],
                  [None, "A second document on mountain trails, passes and the weather of high valleys. " * 70]],
    }
    path = tmp_path / "obelics.parquet"
    pq.write_table(pa.table(docs), path)
    return path


@pytest.fixture
def real_files(tmp_path):
    return {"text_needles": str(write_needlebench(tmp_path / "needles.jsonl")),
            "image_needles": str(write_mmniah(tmp_path)), "image_root": str(tmp_path),
            "haystack": str(write_obelics(tmp_path))}


# ---- NeedleBench --------------------------------------------------------------------------

def test_needlebench_reader_strips_the_format_instruction_and_keeps_arg2(real_files):
    recs = read_needlebench(real_files["text_needles"])
    assert len(recs) == len(STOCK)                                    # the Chinese line is skipped
    assert recs[0].question == "Which band was the first to perform on the Moon?"
    assert recs[0].needle == STOCK[0][0] and recs[0].answer == "Virtual Rocket Band"
    assert strip_format_instruction("Where? Before answering, please consider x. Please answer in the format 'y'.") \
        == "Where?"


@pytest.mark.parametrize("line,field", [
    ('{"needle": "x", "language": "English"}', "retrieval_question"),
    ('{"needle": "", "retrieval_question": "Where?", "language": "English"}', "needle"),
    ('{"needle": "x", "retrieval_question": "Where?", "arg2": {"a": 1}, "language": "English"}', "arg2"),
    ('{"needle": "x", "retrieval_question": "Please answer in the format \'y\'.", "language": "English"}',
     "retrieval_question"),
    ('{"id": "dup", "needle": "x", "retrieval_question": "Where?", "language": "English"}\n'
     '{"id": "dup", "needle": "y", "retrieval_question": "When?", "language": "English"}', "id"),
])
def test_needlebench_malformed_records_give_one_line_naming_file_record_field(tmp_path, line, field):
    bad = write_needlebench(tmp_path / "bad.jsonl", STOCK[:2], extra=[line])
    lineno = len(STOCK[:2]) + 2 + line.count("\n")   # the Chinese line, then the bad record's last line
    with pytest.raises(ValueError) as err:
        read_needlebench(bad)
    msg = str(err.value)
    assert f"bad.jsonl:{lineno}: field '{field}'" in msg and "\n" not in msg
    bad.write_text(bad.read_text() + "not json\n")
    with pytest.raises(ValueError, match=rf"bad.jsonl:{lineno}: field|bad.jsonl:{lineno + 1}: invalid JSON"):
        read_needlebench(bad, drops=DropLog())


def test_query_entity_is_what_the_question_names_not_the_answer():
    e = query_entity("Which band was the first to perform on the Moon?", STOCK[0][0], "Virtual Rocket Band")
    assert (e.text, e.kind) == ("Moon", "celestial")
    assert query_entity(STOCK[3][1], STOCK[3][0], "Amber Compass").kind == "place"
    assert query_entity(STOCK[6][1], STOCK[6][0], "grey heron").text == "1962"
    assert query_entity(STOCK[7][1], STOCK[7][0], "").text == "Professor Lindqvist"
    assert query_entity("What is it?", "Nothing shared here.", "") is None


def test_text_families_from_a_stock_file(real_files):
    drops = DropLog("questions")
    needles = text_families(read_needlebench(real_files["text_needles"]), 5, drops)
    assert drops.reasons["shares its question with an earlier needle (a second candidate answering it)"] == 3
    assert drops.reasons["the entity it names is a short number, which any long haystack repeats"] == 1
    assert len(needles) == 5 * 5 and drops.kept == 5
    fams = {}
    for n in needles:
        fams.setdefault(n.family, []).append(n)
    for members in fams.values():
        real, *looks = members
        assert not real.derived and all(n.derived for n in looks)
        assert len({n.entity for n in members}) == 5 and len({n.query for n in members}) == 5
        for n in looks:  # fluent, same sentence but for the entity, and it names its own entity
            assert occurs(n.entity, n.anchor_text) and occurs(n.entity, n.query)
            assert not occurs(real.entity, n.anchor_text) and n.answer == real.answer
            a, b = real.anchor_text.split(), n.anchor_text.split()
            assert len(set(a) ^ set(b)) <= 4
    moon = fams["nb-nb1"]
    assert moon[1].anchor_text.startswith("The first band to play on ") and " the Moon" not in moon[1].anchor_text
    assert moon[1].query == f"Which band was the first to perform on {moon[1].entity}?"
    # a substitute never appears in any other needle or question
    texts = [t for n in needles for t in (n.anchor_text, n.query)]
    for n in needles:
        holders = {m.family for m in needles if occurs(n.entity, m.anchor_text)}
        assert holders == {n.family}, n.entity
    assert all("Please answer" not in t for t in texts)


# ---- MM-NIAH ------------------------------------------------------------------------------

def test_mmniah_reader_takes_needles_from_meta_not_images_list(real_files, tmp_path):
    recs = read_mmniah_image_needles(real_files["image_needles"], real_files["image_root"])
    assert [r.path.name for r in recs] == [f"needle{i}.png" for i in range(10)]
    assert all("ctx" not in r.path.name for r in recs)
    # a reused needle image (same path, or same picture elsewhere) is one needle, and the repeat is counted
    lines = read_text_lines(real_files["image_needles"])
    again = json.loads(lines[0])
    again["id"] = 77
    (tmp_path / "imgs" / "copy.png").write_bytes((tmp_path / "imgs" / "needle1.png").read_bytes())
    again2 = {**again, "id": 78, "meta": {**again["meta"], "needles": ["imgs/copy.png"]}}
    path = tmp_path / "reused.jsonl"
    path.write_text("\n".join(lines + [json.dumps(again), json.dumps(again2)]) + "\n")
    repeats = DropLog("distinct")
    assert len(read_mmniah_image_needles(path, real_files["image_root"], repeats=repeats)) == 10
    assert (repeats.read, repeats.kept, repeats.reasons["same image as an earlier needle"]) == (12, 10, 2)


@pytest.mark.parametrize("record,field", [
    ({"id": 1, "images_list": [], "question": "q", "answer": 0, "meta": "{\"needles\": []}"}, "meta"),
    ({"id": 1, "images_list": [], "question": "q", "answer": 0, "meta": {"needles": []}}, "meta.needles"),
    ({"id": 1, "images_list": [], "question": "q", "answer": "B",
      "meta": {"needles": ["imgs/needle0.png"], "choices_image_path": ["a.png", "b.png"]}}, "answer"),
    ({"id": 5, "images_list": [], "question": "q", "answer": 0, "meta": {"needles": ["imgs/missing.png"]}},
     "meta.needles[0]"),
    ({"id": 0, "images_list": [], "question": "q", "answer": 0, "meta": {"needles": ["imgs/needle1.png"]}}, "id"),
])
def test_mmniah_malformed_records_give_one_line_naming_file_record_field(tmp_path, record, field):
    path = write_mmniah(tmp_path, n=2, bad=[json.dumps(record)])
    with pytest.raises(ValueError) as err:
        read_mmniah_image_needles(path, tmp_path)
    msg = str(err.value)
    assert f"retrieval-image-val.jsonl:3: field '{field}'" in msg and "\n" not in msg
    drops = DropLog("images")
    assert len(read_mmniah_image_needles(path, tmp_path, drops=drops)) == 2 and drops.dropped == 1


def test_image_families_group_nearest_needles(real_files):
    recs = read_mmniah_image_needles(real_files["image_needles"], real_files["image_root"])
    needles = image_families(recs, family_size=2)
    fams = {}
    for n in needles:
        fams.setdefault(n.family, []).append(n.entity)
    # each colour and its slightly shifted twin: (0,1), (2,3), ...
    assert sorted(fams.values()) == [[str(i), str(i + 1)] for i in range(0, 10, 2)]
    assert all(n.image_query for n in needles)


def test_image_families_under_a_registered_image_embedder(real_files, monkeypatch):
    from mmbench.models import registry

    monkeypatch.setitem(registry._REGISTRY, "toy-colour", registry.ModelSpec(
        "toy-colour", "toy_models:HashingModel", ("text", "image"), None, "mean colour of the pixels"))
    recs = read_mmniah_image_needles(real_files["image_needles"], real_files["image_root"])
    with pytest.raises(ValueError, match="needs a model loader"):   # builders import no model code
        image_families(recs, family_size=2, descriptor="model:toy-colour")
    needles = image_families(recs, family_size=2, descriptor="model:toy-colour", load_model=registry.load_model)
    pairs = {}
    for n in needles:
        pairs.setdefault(n.family, []).append(n.entity)
    assert sorted(pairs.values()) == [[str(i), str(i + 1)] for i in range(0, 10, 2)]
    with pytest.raises(ValueError, match="does not embed images"):
        image_families(recs, 2, descriptor="model:bm25", load_model=registry.load_model)
    with pytest.raises(ValueError, match="unknown image_descriptor 'sift'"):
        image_families(recs, 2, descriptor="sift")


# ---- end to end -----------------------------------------------------------------------------

def test_real_build_from_stock_files_is_valid_and_bm25_finds_every_anchor(real_files, tmp_path):
    from mmbench.models.registry import load_model
    from mmbench.running.runner import RunOptions, run_poolset

    out = tmp_path / "ps"
    get_task("visual_grounding").build("real", out, seed=0, lengths=(256, 1024), backgrounds=("text", "image"),
                                       needles_per_kind=10, progress=False, **real_files)
    ps = load_poolset(out, verify=True)
    report = validate(ps)
    assert report.ok and report.checked["entity_unique"] > 0 and report.checked["shared_haystack"] > 0
    assert ps.manifest["validity"]["ok"] is True
    dropped = ps.manifest["dropped"]["text_needle_questions"]
    assert dropped["read"] == len(STOCK) and dropped["kept"] == 5
    assert ps.manifest["sources"]["haystack"].startswith("obelics.parquet sha256:")
    left_out = ps.manifest["dropped"]["haystack_paragraphs"]       # the paragraph naming "Moon" is not used
    assert (left_out["read"], left_out["kept"]) == (4, 3)
    assert not any("moon rose" in c.text.lower() for c in ps.candidates)
    cands = ps.candidate_by_id()
    for item in ps.pools:
        (rel,) = item.relevant_ids
        assert len(item.candidate_ids) == 10
        if item.meta["anchor_kind"] == "text":   # exactly one candidate names the entity the query names
            q = ps.query_by_id()[item.query_id]
            holders = [c for c in item.candidate_ids if q.meta["entity"].lower() in cands[c].text.lower()]
            assert holders == [rel]
    per_query, _, _ = run_poolset(ps, load_model("bm25"), RunOptions(progress=False, use_cache=False))
    img_bg = per_query[(per_query["anchor_kind"] == "text") & (per_query["background_modality"] == "image")]
    assert len(img_bg) == 2 * 6 * 10
    assert img_bg.groupby("depth")["precision_at_1"].mean().min() >= 0.95
    queries = ps.query_by_id()
    assert all(q.segments[0].kind == "image" for q in queries.values() if q.meta["anchor_kind"] == "image")


def test_build_fails_when_too_many_records_are_unusable_unless_allowed(real_files, tmp_path):
    bad = ['{"needle": "x", "language": "English"}', '{"needle": "", "retrieval_question": "Where?"}']
    files = {**real_files, "text_needles": str(write_needlebench(tmp_path / "bad.jsonl", extra=bad))}
    kw = dict(lengths=(256,), backgrounds=("image",), kinds=("text",), needles_per_kind=10, progress=False)
    with pytest.raises(ValueError, match=r"bad.jsonl: 2 of 11 NeedleBench lines unusable .*allow_missing=true"):
        get_task("visual_grounding").build("real", tmp_path / "a", seed=0, **kw, **files)
    assert not (tmp_path / "a").exists()
    with pytest.raises(ValueError, match="allow_missing=true"):   # "false" from --param means false
        get_task("visual_grounding").build("real", tmp_path / "a", seed=0, allow_missing="false", **kw, **files)
    ps = get_task("visual_grounding").build("real", tmp_path / "b", seed=0, allow_missing="true", **kw, **files)
    rec = ps.manifest["dropped"]["text_needle_records"]
    assert rec["read"] == 11 and rec["kept"] == 9
    assert rec["dropped"]["field 'retrieval_question' missing or empty"]["examples"] == [f"{files['text_needles']}:11"]


def test_obelics_errors_name_the_row(tmp_path):
    from mmbench.builders.sources.backgrounds import obelics_background
    from mmbench.data.media import MediaStore
    from mmbench.data.tokens import UnifiedTokenCounter

    tok = UnifiedTokenCounter.default().tokenizer
    url = tmp_path / "url.parquet"
    pq.write_table(pa.table({"texts": [["some text", None]], "images": [[None, "https://example.org/a.jpg"]]}), url)
    with pytest.raises(ValueError, match=r"row 0: image is a URL .*mmbench prepare obelics"):
        obelics_background(url, tok, MediaStore(tmp_path / "m"))
    drops = DropLog("images")
    with pytest.raises(ValueError, match=r"none of its 1 images is readable \(image is a URL ×1\)"):
        obelics_background(url, tok, MediaStore(tmp_path / "m"), drops=drops)
    broken = tmp_path / "broken.parquet"
    pq.write_table(pa.table({"texts": [["some text", None]], "images": [[None, b"garbage"]]}), broken)
    with pytest.raises(ValueError, match=r"broken.parquet: row 0: corrupt image"):
        obelics_background(broken, tok, MediaStore(tmp_path / "m"))
    uneven = tmp_path / "uneven.parquet"
    pq.write_table(pa.table({"texts": [["a", None], ["b"]], "images": [[None, "x.png"], [None, None]]}), uneven)
    with pytest.raises(ValueError, match=r"uneven.parquet: row 1: `texts` and `images` must be lists of equal length"):
        obelics_background(uneven, tok, MediaStore(tmp_path / "m"))
    nocol = tmp_path / "nocol.parquet"
    pq.write_table(pa.table({"text": ["x"]}), nocol)
    with pytest.raises(ValueError, match="column 'texts' missing"):
        obelics_background(nocol, tok, MediaStore(tmp_path / "m"))


def test_cli_real_build_prints_what_it_read_kept_and_dropped(real_files, tmp_path, capsys):
    from mmbench.cli import main

    out = tmp_path / "cli"
    args = ["build", "--task", "visual_grounding", "--source", "real", "--out", str(out), "--param", "lengths=[256]",
            "--param", "backgrounds=[image]", "--param", "kinds=[text]", "--param", "needles_per_kind=10",
            "--param", f"text_needles={real_files['text_needles']}", "--param", f"haystack={real_files['haystack']}",
            "--param", "progress=False"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "NeedleBench lines: 9 read -> 9 kept" in printed
    assert "NeedleBench questions made into families: 9 read -> 5 kept" in printed
    assert "dropped 3: shares its question with an earlier needle" in printed
    assert "validity: 14 invariants checked, 0 violations" in printed   # the 9 of before, label_blind, pool_order_blind, shortcut_probe, pool_centre_free, lexical_baseline


@pytest.mark.parametrize("wrapped,expected", [
    ("The answer to the question 'Which band was the first to perform on the Moon?' was",
     "Which band was the first to perform on the Moon?"),
    ("The answer to the question \u201cWho is the chief archivist of Harrow City?\u201d is ______."
     + FORMAT.format("The answer is ______."), "Who is the chief archivist of Harrow City?"),
    ("What was the answer to the question 'What legendary object lies beneath Kestrel Island?'",
     "What legendary object lies beneath Kestrel Island?"),
    ("\u95ee\u9898\u201c\u54ea\u652f\u4e50\u961f\u6700\u5148\u5728\u6708\u7403\u4e0a\u6f14\u51fa\uff1f\u201d\u7684\u7b54\u6848\u662f",
     "\u54ea\u652f\u4e50\u961f\u6700\u5148\u5728\u6708\u7403\u4e0a\u6f14\u51fa\uff1f"),
])
def test_answer_stem_wrappers_are_stripped_from_needlebench_questions(tmp_path, wrapped, expected):
    """Before issue 24 the wrapper stayed: every query shared 'The answer to the question' and a trailing 'was'."""
    lang = "Chinese" if expected[0] > "\u3000" else "English"
    path = tmp_path / "needles.jsonl"
    path.write_text(json.dumps({"needle": "n", "retrieval_question": wrapped, "arg2": "x", "language": lang},
                               ensure_ascii=False) + "\n")
    (rec,) = read_needlebench(path, language=lang)
    assert rec.question == expected
    assert strip_format_instruction(expected) == expected   # an unwrapped question is left as it is
