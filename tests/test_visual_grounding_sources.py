"""Real-source readers for Visual Grounding, on small files in their real formats."""
import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from mmbench.builders.sources.needles import read_mmniah_image_needles, read_needlebench
from mmbench.poolset import load_poolset
from mmbench.tasks import get_task


def _png(colour, size=(64, 48)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture
def real_files(tmp_path):
    nb = tmp_path / "needles.jsonl"
    rows = [{"needle": f"The hidden code of vault {i} is {1000 + i}.", "retrieval_question": f"What is the code of vault {i}?",
             "gold_standard_answer": str(1000 + i), "language": "English", "arg2": ""} for i in range(4)]
    rows.append({"needle": "金库的密码是1234。", "retrieval_question": "金库的密码是什么？", "language": "Chinese"})
    nb.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n")
    (tmp_path / "imgs").mkdir()
    mm = tmp_path / "mmniah.jsonl"
    recs = []
    for i, colour in enumerate(["red", "green", "blue", "yellow"]):
        (tmp_path / "imgs" / f"n{i}.png").write_bytes(_png(colour))
        recs.append({"id": f"mm{i}", "images_list": [f"imgs/ctx{i}.png", f"imgs/n{i}.png"],
                     "context": "<image> text <image>", "question": f"Find the {colour} cartoon.", "answer": colour,
                     "meta": {"needle_image": f"imgs/n{i}.png"}})
    mm.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    (tmp_path / "photo.png").write_bytes(_png("purple", (80, 60)))
    docs = {
        "texts": [["A long article about harbours and ships. " * 40, None, "More words on tides and sails. " * 30],
                  [None, "Second document on mountain trails and weather. " * 50]],
        "images": [[None, {"bytes": None, "path": "photo.png"}, None], [{"bytes": _png("orange"), "path": None}, None]],
    }
    ob = tmp_path / "obelics.parquet"
    pq.write_table(pa.table(docs), ob)
    return {"text_needles": str(nb), "image_needles": str(mm), "image_root": str(tmp_path), "haystack": str(ob)}


def test_needlebench_reader_filters_language_and_checks_fields(real_files, tmp_path):
    needles = read_needlebench(real_files["text_needles"])
    assert len(needles) == 4 and needles[0].query == "What is the code of vault 0?"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"needle": "x"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:1: field 'retrieval_question'"):
        read_needlebench(bad)
    bad.write_text('{"needle": "x", "retrieval_question": "y"}\nnot json\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: invalid JSON"):
        read_needlebench(bad)


def test_mmniah_reader(real_files, tmp_path):
    needles = read_mmniah_image_needles(real_files["image_needles"], real_files["image_root"])
    assert [n.query for n in needles][:2] == ["Find the red cartoon.", "Find the green cartoon."]
    assert needles[2].anchor_image().getpixel((5, 5)) == (0, 0, 255)
    with pytest.raises(FileNotFoundError, match="needle image"):
        read_mmniah_image_needles(real_files["image_needles"], tmp_path / "elsewhere")


def test_real_build_end_to_end(real_files, tmp_path):
    out = tmp_path / "ps"
    get_task("visual_grounding").build("real", out, seed=0, lengths=(256, 1024), needles_per_kind=4,
                                       progress=False, **real_files)
    ps = load_poolset(out, verify=True)
    assert len(ps.queries) == 8
    assert len(ps.pools) == 2 * 3 * 2 * 6 * 4
    assert ps.manifest["sources"]["haystack"].startswith("obelics.parquet sha256:")
    text_bg = [c for c in ps.candidates if c.meta["background_modality"] == "text"]
    assert any("harbours" in c.text or "mountain" in c.text for c in text_bg)
    for c in ps.candidates:
        assert abs(c.tokens - c.meta["length_tokens"]) <= 0.1 * c.meta["length_tokens"]


def test_obelics_errors_name_the_row(real_files, tmp_path):
    from mmbench.builders.sources.backgrounds import obelics_background
    from mmbench.media import MediaStore
    from mmbench.tokens import UnifiedTokenCounter

    tok = UnifiedTokenCounter.default().tokenizer
    url = tmp_path / "url.parquet"
    pq.write_table(pa.table({"texts": [["some text", None]], "images": [[None, "https://example.org/a.jpg"]]}), url)
    with pytest.raises(ValueError, match=r"row 0: image is a URL"):
        obelics_background(url, tok, MediaStore(tmp_path / "m"))
    broken = tmp_path / "broken.parquet"
    pq.write_table(pa.table({"texts": [["some text", None]], "images": [[None, b"garbage"]]}), broken)
    with pytest.raises(ValueError, match=r"broken.parquet: row 0: corrupt image"):
        obelics_background(broken, tok, MediaStore(tmp_path / "m"))
    nocol = tmp_path / "nocol.parquet"
    pq.write_table(pa.table({"text": ["x"]}), nocol)
    with pytest.raises(ValueError, match="column 'texts' missing"):
        obelics_background(nocol, tok, MediaStore(tmp_path / "m"))
