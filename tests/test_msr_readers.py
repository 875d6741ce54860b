"""Multi-Source Reasoning readers on small files in the official layouts, written here: HotpotQA's
`hotpot_dev_distractor_v1.json` (hotpotqa/hotpot README) and MMDocRAG's `dev_15.jsonl`
(MMDocRAG/MMDocRAG dataset/README.md), including malformed variants. Every bad input gives a
one-line error naming the file, the record (index or line) and the field."""
import json

import pytest

from mmbench.builders.multi_source_reasoning import build
from mmbench.builders.sources import sample_reasoning as sr
from mmbench.builders.sources.hotpotqa import read_hotpotqa
from mmbench.builders.sources.mmdocrag import read_mmdocrag
from mmbench.data.media import MediaStore
from mmbench.data.tokens import UnifiedTokenCounter

WIKI = {  # one record as the official distractor file has it (int-free ids, leading-space sentences)
    "_id": "5a8c7595554299585d9e36b6", "question": "Which river flows through the home town of the author of Blue Shore?",
    "answer": "Mirrow", "type": "bridge", "level": "medium",
    "supporting_facts": [["Blue Shore", 0], ["Ada Lockhart", 1], ["Pellingford", 0]],
    "context": [["Blue Shore", [" Blue Shore is a 1931 novel by Ada Lockhart.", " It sold well."]],
                ["Ada Lockhart", [" Ada Lockhart was a poet.", " Lockhart grew up in Pellingford."]],
                ["Pellingford", [" The River Mirrow flows through Pellingford.", " It has a fair."]]],
}


@pytest.fixture(scope="module")
def counter():
    return UnifiedTokenCounter.default()


def _one_line(exc_info, *parts):
    msg = str(exc_info.value)
    assert "\n" not in msg, msg
    for p in parts:
        assert p in msg, (p, msg)


@pytest.mark.parametrize("mutate, parts", [
    (lambda r: [r, "not a record"], ["record 1", "expected a JSON object"]),
    (lambda r: [{k: v for k, v in r.items() if k != "question"}], ["record 0", "'question'"]),
    (lambda r: [{**r, "context": {"title": ["a"]}}], ["record 0", "field 'context'"]),
    (lambda r: [{**r, "supporting_facts": None}], ["record 0", "field 'supporting_facts'"]),
    (lambda r: [{**r, "supporting_facts": [["Blue Shore", "first"]]}], ["record 0", "field 'supporting_facts'"]),
    (lambda r: {"data": [r]}, ["expected a JSON list"]),
])
def test_hotpotqa_malformed_records(tmp_path, counter, mutate, parts):
    f = tmp_path / "hotpot_dev_distractor_v1.json"
    f.write_text(json.dumps(mutate(dict(WIKI))))
    with pytest.raises(ValueError) as e:
        read_hotpotqa(f, counter)
    _one_line(e, str(f), *parts)


def test_hotpotqa_non_utf8_invalid_json_and_bad_parquet(tmp_path, counter):
    f = tmp_path / "hotpot_dev_distractor_v1.json"
    f.write_bytes(b'[\n{"_id": "x",\n "question": "caf\xe9?"}\n]')
    with pytest.raises(ValueError) as e:
        read_hotpotqa(f, counter)
    _one_line(e, f"{f}:3:", "not valid UTF-8", "0xe9")
    f.write_text('[{"_id": "x", ')
    with pytest.raises(ValueError) as e:
        read_hotpotqa(f, counter)
    _one_line(e, str(f), "invalid JSON")
    p = tmp_path / "validation-00000-of-00001.parquet"
    p.write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(ValueError) as e:
        read_hotpotqa(p, counter)
    _one_line(e, str(p), "not a readable parquet file")
    j = tmp_path / "distractor.jsonl"
    j.write_bytes(json.dumps({**WIKI, "id": "a"}).encode() + b"\n" + b'{"id": "b\xff"}\n')
    with pytest.raises(ValueError) as e:
        read_hotpotqa(j, counter)
    _one_line(e, f"{j}:2:", "not valid UTF-8", "0xff")


def _mmdocrag_files(tmp_path, n=6):
    records, images = sr.mmdocrag_records(3, n)
    for path, img in images.items():
        (tmp_path / "images" / path).parent.mkdir(parents=True, exist_ok=True)
        img.save(tmp_path / "images" / path)
    for k, r in enumerate(records):   # the release's own extra fields and an int q_id
        r.update({"q_id": 1000 + k, "evidence_modality_type": ["text", "image"],
                  "answer_interleaved": "See ![](image1) and the letter."})
    return records


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _broken(field, value):
    def mutate(r):
        r = json.loads(json.dumps(r))
        if field.startswith("text_quotes.") or field.startswith("img_quotes."):
            group, key = field.split(".")
            if value is None:
                del r[group][0][key]
            else:
                r[group][0][key] = value
        elif value is None:
            del r[field]
        else:
            r[field] = value
        return r
    return mutate


@pytest.mark.parametrize("mutate, parts", [
    (_broken("question", None), ["'question'"]),
    (_broken("text_quotes", None), ["field 'text_quotes'"]),
    (_broken("img_quotes", "image1"), ["field 'img_quotes'"]),
    (_broken("gold_quotes", "image1"), ["field 'gold_quotes'"]),
    (_broken("img_quotes.quote_id", None), ["img_quotes[0]", "'quote_id'"]),
    (_broken("text_quotes.text", None), ["text quote text1", "'text'"]),
    (_broken("img_quotes.img_path", None), ["quote image1", "'img_path'"]),
    (_broken("text_quotes.layout_id", "top"), ["quote text1", "'page_id'/'layout_id'"]),
])
def test_mmdocrag_malformed_records(tmp_path, counter, mutate, parts):
    records = _mmdocrag_files(tmp_path, 2)
    records[1] = mutate(records[1])
    f = _write(tmp_path / "dev_15.jsonl", records)
    with pytest.raises((ValueError, FileNotFoundError)) as e:
        read_mmdocrag(f, tmp_path / "images", counter, MediaStore(tmp_path / "media"))
    _one_line(e, f"{f}:2:", *parts)


def test_mmdocrag_bad_lines_corrupt_image_and_non_utf8(tmp_path, counter):
    records = _mmdocrag_files(tmp_path, 2)
    f = tmp_path / "dev_15.jsonl"
    media = MediaStore(tmp_path / "media")
    for raw, parts in [(b"[1, 2]", ["expected a JSON object"]), (b"{oops", ["invalid JSON"]),
                       (b'{"q_id": "\xc3("}', ["not valid UTF-8", "0xc3"])]:
        f.write_bytes(json.dumps(records[0]).encode() + b"\n" + raw + b"\n")
        with pytest.raises(ValueError) as e:
            read_mmdocrag(f, tmp_path / "images", counter, media)
        _one_line(e, f"{f}:2:", *parts)
    _write(f, records)
    (tmp_path / "images" / records[1]["img_quotes"][2]["img_path"]).write_bytes(b"not a png")
    with pytest.raises(ValueError) as e:
        read_mmdocrag(f, tmp_path / "images", counter, media)
    _one_line(e, f"{f}:2:", "quote image3", "corrupt image")


def test_real_build_from_official_layouts_is_valid_and_counts_drops(tmp_path):
    """A `real` build from the official layouts passes every invariant and says what it dropped."""
    hp = tmp_path / "hotpot_dev_distractor_v1.json"
    lost = {**WIKI, "_id": "no-evidence", "supporting_facts": [["Nobody", 0], ["Nothing", 2]]}   # none resolve
    spaced = sr.hotpot_records(11, 9)
    for r in spaced:   # as in the official file: sentences open with a space; some hold double spaces
        r["context"] = [[t, [" " + x.replace(" is ", "  is ", 1) for x in sents]] for t, sents in r["context"]]
    hp.write_text(json.dumps([WIKI, lost] + spaced))
    records = _mmdocrag_files(tmp_path, 7)
    md = _write(tmp_path / "dev_15.jsonl", records)
    ps = build("real", tmp_path / "msr", seed=0, lengths=(2048,), queries_per_dataset=5, candidates_per_query=4,
               hotpotqa=str(hp), mmdocrag=str(md), mmdocrag_images=str(tmp_path / "images"), progress=False)
    v = ps.manifest["validity"]
    assert v["ok"] and v["checked"]["hard_chain_broken"] >= 10      # one variant per record: a Hard pool of 4 holds two families of two
    drops = ps.manifest["dropped"]
    assert drops["records"]["read"] == 11 + 7 and drops["records"]["kept"] == 10
    assert any("not found in the context" in r for r in drops["records"]["dropped"])
    hv = drops["hard_variants"]
    assert hv["kept"] == v["checked"]["hard_chain_broken"] and hv["read"] > hv["kept"]
    decided = {d["query_id"] for d in ps.builder["query_filter"]["decisions"]}
    assert WIKI["_id"] in decided and "1000" in decided       # both official-layout ids were read
