"""Real-source readers on small files in the real layouts (written here), and `real` builds from them."""
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mmbench.builders.sources import sample_reasoning as sr
from mmbench.builders.sources.govreport import govreport_fingerprint, read_govreport
from mmbench.builders.sources.hotpotqa import read_hotpotqa
from mmbench.builders.sources.mmdocrag import read_mmdocrag
from mmbench.builders.sources.mmlongbench import read_mmlongbench
from mmbench.builders.sources.sample_reports import paged_documents, pydoc_reports
from mmbench.data.documents import Image, Text
from mmbench.data.media import MediaStore
from mmbench.data.tokens import UnifiedTokenCounter

ORIGINAL = {
    "_id": "5a8b57f25542995d1e6f1371", "question": "Were Scott Derrickson and Ed Wood of the same nationality?",
    "answer": "yes", "type": "comparison", "level": "hard",
    "supporting_facts": [["Scott Derrickson", 0], ["Ed Wood", 0]],
    "context": [["Ed Wood (film)", [" Ed Wood is a 1994 biopic.", " It stars Johnny Depp."]],
                ["Scott Derrickson", [" Scott Derrickson is an American director.", " He lives in Los Angeles."]],
                ["Ed Wood", [" Edward Davis Wood Jr. was an American filmmaker.", " He made cult films."]]],
}


@pytest.fixture(scope="module")
def counter():
    return UnifiedTokenCounter.default()


def _hub_layout(rec):
    return {"id": rec["_id"], "question": rec["question"], "answer": rec["answer"], "type": rec["type"],
            "level": rec["level"],
            "supporting_facts": {"title": [t for t, _ in rec["supporting_facts"]],
                                 "sent_id": [k for _, k in rec["supporting_facts"]]},
            "context": {"title": [t for t, _ in rec["context"]], "sentences": [s for _, s in rec["context"]]}}


def test_hotpotqa_original_json_and_hub_parquet_agree(tmp_path, counter):
    js = tmp_path / "hotpot_dev_distractor_v1.json"
    js.write_text(json.dumps([ORIGINAL]))
    pqf = tmp_path / "validation-00000-of-00001.parquet"
    pq.write_table(pa.Table.from_pylist([_hub_layout(ORIGINAL)]), pqf)
    jl = tmp_path / "distractor.jsonl"
    jl.write_text(json.dumps(_hub_layout(ORIGINAL)) + "\n")
    recs = [read_hotpotqa(p, counter)[0] for p in (js, pqf, jl)]
    for r in recs:
        assert r.id == ORIGINAL["_id"] and not r.problems
        ev = [r.units[i] for i in r.evidence_indices]
        assert [u.segment.text for u in ev] == [" Scott Derrickson is an American director.",
                                                " Edward Davis Wood Jr. was an American filmmaker."]
        assert [u.info["title"] for u in ev] == ["Scott Derrickson", "Ed Wood"]
        assert len(r.units) == 3 + 6 and r.tokens == sum(counter.text(u.segment.text) for u in r.units)
    assert [u.segment for u in recs[0].units] == [u.segment for u in recs[1].units] == [u.segment for u in recs[2].units]


def test_hotpotqa_errors_name_file_and_field(tmp_path, counter):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{**ORIGINAL, "context": "oops"}]))
    with pytest.raises(ValueError, match=r"bad.json: record 0: field 'context'"):
        read_hotpotqa(bad, counter)
    missing = tmp_path / "missing.json"
    missing.write_text(json.dumps([{**ORIGINAL, "supporting_facts": [["Nobody", 3]]}]))
    (rec,) = read_hotpotqa(missing, counter)
    assert rec.problems == ["supporting fact ('Nobody', 3) not found in the context"]
    with pytest.raises(FileNotFoundError, match="nope.json"):
        read_hotpotqa(tmp_path / "nope.json", counter)


def _write_mmdocrag(folder, n):
    records, images = sr.mmdocrag_records(5, n)
    for path, img in images.items():
        (folder / "images" / path).parent.mkdir(parents=True, exist_ok=True)
        img.save(folder / "images" / path)
    jl = folder / "dev_15.jsonl"
    jl.write_text("".join(json.dumps(r) + "\n" for r in records))
    return jl, records


def test_mmdocrag_jsonl_with_image_folder(tmp_path, counter):
    jl, raw = _write_mmdocrag(tmp_path, 2)
    recs = read_mmdocrag(jl, tmp_path / "images", counter, MediaStore(tmp_path / "media"))
    assert [r.id for r in recs] == [r["q_id"] for r in raw]
    r = recs[0]
    assert sorted(r.units[i].info["quote_id"] for i in r.evidence_indices) == sorted(raw[0]["gold_quotes"])
    assert all(r.units[i].role == "evidence" for i in r.evidence_indices) and len(r.units) == 14
    kinds = [type(u.segment) for u in r.units]
    assert Image in kinds and Text in kinds
    pages = [(int(q["page_id"]), int(q["layout_id"])) for q in raw[0]["text_quotes"] + raw[0]["img_quotes"]]
    assert [u.info["quote_id"] for u in r.units][:2] == \
        [q["quote_id"] for _, q in sorted(zip(pages, raw[0]["text_quotes"] + raw[0]["img_quotes"]),
                                          key=lambda x: x[0])][:2]      # document order (page, layout)
    img = next(u for u in r.units if isinstance(u.segment, Image))
    assert (tmp_path / "media" / img.segment.ref).is_file() and img.tokens == 12 * 8
    (tmp_path / "images" / raw[1]["img_quotes"][0]["img_path"]).unlink()
    with pytest.raises(FileNotFoundError, match=r"dev_15.jsonl:2: quote image1: image file .* not found"):
        read_mmdocrag(jl, tmp_path / "images", counter, MediaStore(tmp_path / "media"))


def test_govreport_parquet_and_jsonl(tmp_path):
    rows = [{"id": "GAO-1", "report": "First paragraph.\nSecond paragraph.\n\nThird.", "summary": "A  summary."},
            {"id": "CRS-2", "report": "Only one.", "summary": "Another."}]
    pqf = tmp_path / "test.parquet"
    pq.write_table(pa.Table.from_pylist(rows), pqf)
    jl = tmp_path / "test.jsonl"
    jl.write_text("".join(json.dumps({"id": r["id"], "document": r["report"], "summary": r["summary"]}) + "\n"
                          for r in rows))
    for path in (pqf, jl):
        reps = read_govreport(path)
        assert [r.id for r in reps] == ["GAO-1", "CRS-2"]
        assert reps[0].paragraphs == ["First paragraph.", "Second paragraph.", "Third."]
        assert reps[0].summary == "A summary."
    jl.write_text(json.dumps({"report": "x"}) + "\n")
    with pytest.raises(ValueError, match=r"test.jsonl:1: field 'summary'"):
        read_govreport(jl)


def _write_mmlongbench(folder, n):
    docs = paged_documents(n)
    lines = []
    for d in docs:
        names = []
        for kind, pages in (("p", d.pages), ("x", d.extension)):
            for k, page in enumerate(pages):
                rel = f"{d.id}/{kind}{k + 1:03d}.png"
                (folder / "pages" / rel).parent.mkdir(parents=True, exist_ok=True)
                page.save(folder / "pages" / rel)
                names.append((kind, rel))
        lines.append({"id": d.id, "answer": d.summary, "pages": [r for k, r in names if k == "p"],
                      "extended_pages": [r for k, r in names if k == "x"]})
    jl = folder / "summ.jsonl"
    jl.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return jl, docs


def test_mmlongbench_page_images(tmp_path):
    jl, docs = _write_mmlongbench(tmp_path, 2)
    got = read_mmlongbench(jl, tmp_path / "pages")
    assert [d.id for d in got] == [d.id for d in docs]
    assert len(got[0].pages) == len(docs[0].pages) and len(got[0].extension) == len(docs[0].extension)
    assert got[0].pages[0].size == docs[0].pages[0].size and got[0].summary == docs[0].summary
    assert got[0].page_names[0].endswith("p001.png")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "x", "summary": "s", "pages": ["nowhere.png"]}) + "\n")
    with pytest.raises(FileNotFoundError, match=r"bad.jsonl:1: page image .*nowhere.png not found"):
        read_mmlongbench(bad, tmp_path / "pages")


def test_real_builds_from_files_in_real_layouts(tmp_path):
    from mmbench.tasks import get_task

    hp = tmp_path / "hotpot.json"
    hp.write_text(json.dumps(sr.hotpot_records(9, 7)))
    md, _ = _write_mmdocrag(tmp_path, 6)
    ps = get_task("multi_source_reasoning").build(
        "real", tmp_path / "msr", seed=0, lengths=(2048,), queries_per_dataset=4, candidates_per_query=4,
        hotpotqa=str(hp), mmdocrag=str(md), mmdocrag_images=str(tmp_path / "images"), progress=False)
    assert {p.subset for p in ps.pools} == {"hotpotqa/easy/2k", "hotpotqa/hard/2k", "mmdocrag/easy/2k",
                                            "mmdocrag/hard/2k"}
    assert ps.sources["hotpotqa"].startswith("hotpot.json sha256:") and ps.sources["filler"].startswith("pydoc")

    gov = tmp_path / "gov.parquet"
    pq.write_table(pa.Table.from_pylist([{"id": r.id, "report": r.text, "summary": r.summary}
                                         for r in pydoc_reports()[:12]]), gov)
    mlb, _ = _write_mmlongbench(tmp_path, 5)
    ps = get_task("logical_summarization").build(   # the reports are about 2K tokens, their pages about 1.3K
        "real", tmp_path / "ls", seed=0, lengths=(2048,), queries_per_dataset=4, candidates_per_query=3,
        govreport=str(gov), mmlongbench=str(mlb), mmlongbench_images=str(tmp_path / "pages"), progress=False)
    assert {p.subset for p in ps.pools} == {"govreport/easy/2k", "govreport/hard/2k", "mmlongbench/easy/2k",
                                            "mmlongbench/hard/2k"}
    assert ps.builder["datasets"]["govreport"]["lookalike_index"]["documents"] == 12   # whole corpus indexed
    assert all(len(p.candidate_ids) == 3 for p in ps.pools)


CRS_RECORD = {  # gov-report/crs/<id>.json in the original release
    "id": "R41234", "title": "A CRS report", "released_date": "2010-05-04",
    "summary": ["First summary paragraph.", "Second summary paragraph."],
    "reports": {"section_title": "", "paragraphs": ["Opening paragraph."],
                "subsections": [{"section_title": "Background", "paragraphs": ["Background text."],
                                 "subsections": [{"section_title": "Details", "paragraphs": ["Deep text."],
                                                  "subsections": []}]}]},
}
GAO_RECORD = {  # gov-report/gao/<id>.json in the original release
    "id": "GAO-18-107", "url": "https://www.gao.gov/products/GAO-18-107", "title": "A GAO report",
    "released_date": "2017-11-01", "published_date": "2017-11-01", "fastfact": ["A fast fact."],
    "highlight": [{"section_title": "Why GAO Did This Study", "paragraphs": ["GAO was asked to review."]},
                  {"section_title": "What GAO Found", "paragraphs": ["GAO found things.", "More findings."]}],
    "report": [{"section_title": "Letter", "paragraphs": ["Dear chairman."],
                "subsections": [{"section_title": "Results", "paragraphs": ["The results."], "subsections": []}]},
               {"section_title": "Appendix", "paragraphs": ["Appendix text."], "subsections": []}],
}


def test_govreport_original_crs_gao_json_layout(tmp_path):
    root = tmp_path / "gov-report"
    for sub, rec in (("crs", CRS_RECORD), ("gao", GAO_RECORD)):
        (root / sub).mkdir(parents=True)
        (root / sub / f"{rec['id']}.json").write_text(json.dumps(rec, indent=2))
    reps = {r.id: r for r in read_govreport(root)}          # the folder
    assert govreport_fingerprint(root).startswith("gov-report/ (2 .json files) sha256:")
    crs, gao = reps["R41234"], reps["GAO-18-107"]
    assert crs.paragraphs == ["Opening paragraph.", "Background", "Background text.", "Details", "Deep text."]
    assert crs.summary == "First summary paragraph. Second summary paragraph."
    assert gao.paragraphs == ["Letter", "Dear chairman.", "Results", "The results.", "Appendix", "Appendix text."]
    assert gao.summary == "GAO was asked to review. GAO found things. More findings."
    one = read_govreport(root / "gao" / "GAO-18-107.json")   # one pretty-printed file
    assert [r.id for r in one] == ["GAO-18-107"] and one[0].paragraphs == gao.paragraphs
    raw = tmp_path / "gao_test.jsonl"                        # launch/gov_report's raw JSON lines
    raw.write_text(json.dumps(CRS_RECORD) + "\n" + json.dumps(GAO_RECORD) + "\n")
    assert [r.summary for r in read_govreport(raw)] == [crs.summary, gao.summary]
    broken = dict(GAO_RECORD, report=[{"section_title": "Letter", "paragraphs": "not a list", "subsections": []}])
    raw.write_text(json.dumps(CRS_RECORD) + "\n" + json.dumps(broken) + "\n")
    with pytest.raises(ValueError, match=r"gao_test.jsonl:2: field 'report'\[0\]: 'paragraphs' must be a list"):
        read_govreport(raw)
    raw.write_text(json.dumps(dict(GAO_RECORD, highlight=[])) + "\n")
    with pytest.raises(ValueError, match=r"gao_test.jsonl:1: field 'highlight' missing or empty"):
        read_govreport(raw)


def test_hotpotqa_paragraph_with_sentences_as_one_string_is_rejected(tmp_path, counter):
    """A paragraph whose sentences are a bare string was read as one sentence per character."""
    flat = [["Ed Wood", " Edward Davis Wood Jr. was an American filmmaker."]] + ORIGINAL["context"][1:]
    bad = tmp_path / "flat.json"
    bad.write_text(json.dumps([{**ORIGINAL, "context": flat}]))
    with pytest.raises(ValueError, match=r"flat.json: record 0: field 'context' paragraph 0 must be a title and a "
                                         r"list of sentence strings"):
        read_hotpotqa(bad, counter)
    hub = _hub_layout(ORIGINAL)
    hub["context"]["sentences"][1] = [" Scott Derrickson is an American director.", None]
    bad_hub = tmp_path / "hub.jsonl"
    bad_hub.write_text(json.dumps(hub) + "\n")
    with pytest.raises(ValueError, match=r"hub.jsonl:1: field 'context' paragraph 1"):
        read_hotpotqa(bad_hub, counter)


def test_mmlongbench_own_summ_jsonl_layout(tmp_path):
    """MMLongBench's summ/gov_K*.jsonl: `image_list` pages and a GovReport highlight-section summary."""
    docs = paged_documents(1)
    rels = []
    for k, page in enumerate(docs[0].pages):
        rel = f"gov-report/bg_pdf_img/gao-18-107/gao-18-107_page{k}.jpg"
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        page.save(tmp_path / rel)
        rels.append(rel)
    rec = {"id": "gov_report_gao-18-107", "url": "https://www.gao.gov/products/GAO-18-107", "image_list": rels,
           "summary": [{"section_title": "Why GAO Did This Study", "paragraphs": ["GAO was asked to review."]},
                       {"section_title": "What GAO Found", "paragraphs": ["GAO found things."]}]}
    jl = tmp_path / "gov_K8.jsonl"
    jl.write_text(json.dumps(rec) + "\n")
    (got,) = read_mmlongbench(jl, tmp_path)
    assert got.id == "gov_report_gao-18-107" and got.summary == "GAO was asked to review. GAO found things."
    assert len(got.pages) == len(rels) and got.extension == [] and got.page_names == rels
    jl.write_text(json.dumps({**rec, "summary": [{"section_title": "x"}]}) + "\n")
    with pytest.raises(ValueError, match=r"gov_K8.jsonl:1: field 'summary' \(or 'answer'\) missing or empty"):
        read_mmlongbench(jl, tmp_path)


def test_mmlongbench_extension_pages_are_the_next_pages_on_disk(tmp_path):
    """Pages beyond those a summ record lists, found beside them, are its unseen extension (consecutive only)."""
    page = paged_documents(1)[0].pages[0]
    folder = tmp_path / "gov-report" / "bg_pdf_img" / "gao-18-107"
    folder.mkdir(parents=True)
    for k in (0, 1, 2, 3, 4, 5, 7):  # page 6 is missing: the extension stops before the gap
        page.save(folder / f"gao-18-107_page{k}.jpg")
    rels = [f"gov-report/bg_pdf_img/gao-18-107/gao-18-107_page{k}.jpg" for k in range(3)]
    jl = tmp_path / "gov_K8.jsonl"
    jl.write_text(json.dumps({"id": "d", "image_list": rels, "summary": "a summary"}) + "\n")
    (got,) = read_mmlongbench(jl, tmp_path)
    assert got.extension_names == [f"gov-report/bg_pdf_img/gao-18-107/gao-18-107_page{k}.jpg" for k in (3, 4, 5)]
    assert len(got.extension) == 3
    jl.write_text(json.dumps({"id": "d", "image_list": rels[:2], "summary": "a summary"}) + "\n")
    (got,) = read_mmlongbench(jl, tmp_path)
    assert [n[-5:] for n in got.extension_names] == ["2.jpg", "3.jpg"]  # at most as many as the document has
    jl.write_text(json.dumps({"id": "d", "image_list": rels, "summary": "a summary", "extended_pages": []}) + "\n")
    assert read_mmlongbench(jl, tmp_path)[0].extension == []  # an explicit list is taken as given


def test_mmdocrag_non_integer_page_id_names_record_and_quote(tmp_path, counter):
    jl, raw = _write_mmdocrag(tmp_path, 2)
    raw[1]["text_quotes"][0]["page_id"] = "p3"
    jl.write_text("".join(json.dumps(r) + "\n" for r in raw))
    quote = raw[1]["text_quotes"][0]["quote_id"]
    with pytest.raises(ValueError, match=rf"dev_15.jsonl:2: quote {quote}: 'page_id'/'layout_id' must be integers"):
        read_mmdocrag(jl, tmp_path / "images", counter, MediaStore(tmp_path / "media"))


def test_hotpotqa_hub_layout_non_integer_sent_id_names_the_line(tmp_path, counter):
    hub = _hub_layout(ORIGINAL)
    hub["supporting_facts"]["sent_id"] = ["zero", 0]
    f = tmp_path / "hub.jsonl"
    f.write_text(json.dumps(hub) + "\n")
    with pytest.raises(ValueError, match=r"hub.jsonl:1: field 'supporting_facts' needs integer 'sent_id'"):
        read_hotpotqa(f, counter)
