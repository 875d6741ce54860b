"""Flickr30k readers: each published layout (the original .token, Karpathy's JSON, the Hugging Face CSV and
archive, the Kaggle CSVs, parquet), their malformed variants (each a one-line error naming file, line or record,
and field), missing images (an error, or a counted drop with a share limit), and the caption-model error."""
from __future__ import annotations

import csv
import json
import re

import pytest

from flickr_layouts import export_layouts, one_line
from mmbench.builders.sources.flickr30k import (FlickrSourceError, read_annotations_csv, read_hf, read_karpathy,
                                                read_token)
from mmbench.cli import main
from mmbench.data.poolset import load_poolset


def test_readers_agree_with_the_sample(tmp_path):
    recs, root = export_layouts(tmp_path)
    want = {r.image_id: r.captions for r in recs}
    readers = {"karpathy": read_karpathy(str(tmp_path / "dataset_flickr30k.json"), str(root)),
               "results.csv": read_annotations_csv(str(tmp_path / "results.csv"), str(root)),
               "annotations.csv": read_annotations_csv(str(tmp_path / "flickr_annotations_30k.csv"), str(root)),
               "token": read_token(str(tmp_path / "results_20130124.token"), str(root)),
               "parquet": read_hf(str(tmp_path / "flickr.parquet"))}
    for name, got in readers.items():
        assert {r.image_id: r.captions for r in got} == want, name
        data, suffix, w, h = got[0].read()
        assert suffix == ".jpg" and (w, h) == (96, 96) and data == (root / f"{got[0].image_id}.jpg").read_bytes()
    assert len(read_karpathy(str(tmp_path / "dataset_flickr30k.json"), str(root), split="test")) == 10


def test_reader_errors_name_file_and_record(tmp_path):
    recs, root = export_layouts(tmp_path, n=6)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"images": [{"filename": f"{recs[0].image_id}.jpg", "sentences": [{"raw": "x"}]},
                                          {"filename": f"{recs[1].image_id}.jpg"}]}))
    with pytest.raises(FlickrSourceError, match=r"bad\.json: images\[1\] lacks field 'sentences'"):
        read_karpathy(str(bad), str(root))
    odd = tmp_path / "odd.csv"
    odd.write_text("foo,bar\n1,2\n")
    with pytest.raises(FlickrSourceError, match="odd.csv: unknown CSV layout"):
        read_annotations_csv(str(odd), str(root))
    (root / f"{recs[0].image_id}.jpg").write_bytes(b"not an image")
    first = [r for r in read_karpathy(str(tmp_path / "dataset_flickr30k.json"), str(root)) if r.image_id == recs[0].image_id]
    with pytest.raises(FlickrSourceError, match=f"{recs[0].image_id}.jpg is not a readable image"):
        first[0].read()
    with pytest.raises(FlickrSourceError, match="needs the parameter image_root"):
        read_karpathy(str(tmp_path / "dataset_flickr30k.json"), None)


def test_results_csv_line_without_its_second_bar_is_read_with_a_warning(tmp_path):
    """The published results.csv has one line like '2199200615.jpg| 4 A dog runs across the grass .'."""
    recs, root = export_layouts(tmp_path, n=3)
    path = tmp_path / "results.csv"
    lines = path.read_text().splitlines()
    target = next(i for i, line in enumerate(lines) if line.endswith(recs[1].captions[3]) and "| 3|" in line)
    lines[target] = lines[target].replace("| 3| ", "| 3 ")
    path.write_text("\n".join(lines) + "\n")
    with pytest.warns(UserWarning, match=rf"results\.csv: line {target + 1}: no '\|' between comment_number"):
        got = {r.image_id: r.captions for r in read_annotations_csv(str(path), str(root))}
    assert got == {r.image_id: r.captions for r in recs}


def test_token_reader_has_no_splits(tmp_path):
    _, root = export_layouts(tmp_path, n=3)
    with pytest.raises(FlickrSourceError, match="no splits; use source karpathy"):
        read_token(str(tmp_path / "results_20130124.token"), str(root), split="test")


@pytest.mark.parametrize("bad, message", [
    ("{name}#0 A dog runs .", r"line 3: no TAB between the caption id and the caption"),
    ("{name}\tA dog runs .", r"line 3: field 'caption id' is '.*\.jpg', expected 'name\.jpg#k'"),
    ("{name}#one\tA dog runs .", r"line 3: field 'caption id' is '.*#one'"),
    ("{name}#0\tA dog runs .", r"line 3: field 'caption id': .*\.jpg#0 appears twice"),
])
def test_token_reader_malformed_lines(tmp_path, bad, message):
    recs, root = export_layouts(tmp_path, n=2)
    name = f"{recs[0].image_id}.jpg"
    path = tmp_path / "bad.token"
    path.write_text(f"{name}#0\t{recs[0].captions[0]}\n{name}#1\t{recs[0].captions[1]}\n{bad.format(name=name)}\n")
    with pytest.raises(FlickrSourceError) as exc:
        read_token(str(path), str(root))
    assert re.search(rf"bad\.token: {message}", one_line(exc))


def test_empty_captions_are_read_and_the_build_drops_and_counts_their_image(tmp_path):
    from mmbench.builders.flickr_hard_negatives import FEW_CAPTIONS, usable_images
    from mmbench.data.drops import DropLog

    recs, root = export_layouts(tmp_path, n=3)
    path = tmp_path / "results_20130124.token"
    lines = path.read_text().splitlines()
    target = next(i for i, line in enumerate(lines) if line.startswith(f"{recs[1].image_id}.jpg#2\t"))
    lines[target] = f"{recs[1].image_id}.jpg#2\t  "
    path.write_text("\n".join(lines) + "\n")
    got = {r.image_id: r for r in read_token(str(path), str(root))}
    assert got[recs[1].image_id].captions[2] == ""
    log = DropLog("images")
    kept = usable_images(list(got.values()), log)
    assert sorted(r.image_id for r in kept) == sorted([recs[0].image_id, recs[2].image_id])
    assert dict(log.reasons) == {FEW_CAPTIONS: 1} and log.read == 3


def test_non_utf8_annotations_name_the_line(tmp_path):
    recs, root = export_layouts(tmp_path, n=2)
    path = tmp_path / "latin1.token"
    path.write_bytes(f"{recs[0].image_id}.jpg#0\tA dog\n".encode() + b"{0}.jpg#1\tA caf\xe9 .\n".replace(
        b"{0}", recs[0].image_id.encode()))
    with pytest.raises(FlickrSourceError) as exc:
        read_token(str(path), str(root))
    assert re.search(r"latin1\.token:2: not valid UTF-8 \(byte 0xe9", one_line(exc))


def test_image_caption_csv_with_an_unquoted_comma_is_an_error(tmp_path):
    """Before: 'A dog, running' was read as 'A dog' and the rest silently dropped."""
    recs, root = export_layouts(tmp_path, n=2)
    path = tmp_path / "captions.txt"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["image", "caption"])
        for r in recs:
            for c in r.captions:
                w.writerow([f"{r.image_id}.jpg", c.replace(" over ", ", over ")])   # commas, quoted by the writer
    got = {r.image_id: r.captions for r in read_annotations_csv(str(path), str(root))}
    assert got == {r.image_id: tuple(c.replace(" over ", ", over ") for c in r.captions) for r in recs}
    lines = path.read_text().splitlines()
    lines[4] = f"{recs[0].image_id}.jpg,A dog, running on grass"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(FlickrSourceError) as exc:
        read_annotations_csv(str(path), str(root))
    assert re.search(r"captions\.txt: line 5: 3 fields where the header has 2 \(an unquoted ',' inside field "
                     r"'caption'\?\)", one_line(exc))


def test_results_csv_with_an_extra_bar_is_an_error(tmp_path):
    recs, root = export_layouts(tmp_path, n=2)
    path = tmp_path / "results.csv"
    lines = path.read_text().splitlines()
    lines[2] = lines[2] + " | and more"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(FlickrSourceError) as exc:
        read_annotations_csv(str(path), str(root))
    assert re.search(r"results\.csv: line 3: 4 fields where the header has 3 \(an unquoted '\|' inside field "
                     r"'comment'\?\)", one_line(exc))


def test_missing_image_is_a_one_line_error_or_a_counted_drop(tmp_path):
    from mmbench.builders.sources.flickr30k import MISSING_IMAGE
    from mmbench.data.drops import DropLog

    recs, root = export_layouts(tmp_path, n=6)
    gone = recs[2].image_id
    (root / f"{gone}.jpg").unlink()
    layouts = [(read_karpathy, "dataset_flickr30k.json", r"dataset_flickr30k\.json: images\[2\]: field 'filename'"),
               (read_token, "results_20130124.token", r"results_20130124\.token: line \d+: field 'caption id'"),
               (read_annotations_csv, "results.csv", r"results\.csv: line \d+: field 'image_name'"),
               (read_annotations_csv, "flickr_annotations_30k.csv",
                r"flickr_annotations_30k\.csv: line 4: field 'filename'")]
    for reader, name, where in layouts:
        with pytest.raises(FlickrSourceError) as exc:
            reader(str(tmp_path / name), str(root))
        assert re.search(rf"{where}: image file .*{gone}\.jpg does not exist", one_line(exc)), name
        log = DropLog("images")
        got = reader(str(tmp_path / name), str(root), drops=log)
        assert sorted(r.image_id for r in got) == sorted(r.image_id for r in recs if r.image_id != gone)
        assert dict(log.reasons) == {MISSING_IMAGE: 1} and gone in log.examples[MISSING_IMAGE][0], name


def test_build_fails_above_the_missing_share_unless_allowed(tmp_path, capsys):
    recs, root = export_layouts(tmp_path, n=30)
    (root / f"{recs[5].image_id}.jpg").unlink()
    out = tmp_path / "out"
    args = ["build", "--task", "flickr_hard_negatives", "--source", "token", "--out", str(out),
            "--param", f"annotations={tmp_path / 'results_20130124.token'}", "--param", f"image_root={root}",
            "--param", "pool_size=25", "--param", "n_queries=5", "--param", "caption_model=minilm"]
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "1 of 30 source images unusable (image file missing under image_root ×1), more " \
                               "than 1%" in err
    assert f"{recs[5].image_id}.jpg" in err and "--param allow_missing=true" in err and not out.exists()
    assert main(args + ["--param", "allow_missing=true"]) == 0
    printed = capsys.readouterr().out
    assert "source images: 30 read -> 29 kept" in printed and "dropped 1: image file missing under image_root" in printed
    ps = load_poolset(out)
    assert ps.manifest["dropped"]["images"]["dropped"]["image file missing under image_root"]["count"] == 1
    assert ps.manifest["builder"]["source_images"] == 30


def test_offline_caption_model_is_a_one_line_error_with_the_fix(tmp_path, monkeypatch, capsys):
    import mmbench.models.sentence_transformer as st

    _, root = export_layouts(tmp_path, n=10)

    def offline(model_id, **_):
        raise OSError("We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find them in "
                      "the cached files.\nCheck your internet connection or see how to run the library in offline "
                      "mode at 'https://huggingface.co/docs/transformers/installation#offline-mode'.")

    monkeypatch.setattr(st, "SentenceTransformerModel", offline)
    capsys.readouterr()
    assert main(["build", "--task", "flickr_hard_negatives", "--source", "karpathy", "--out", str(tmp_path / "o"),
                 "--param", f"annotations={tmp_path / 'dataset_flickr30k.json'}", "--param", f"image_root={root}",
                 "--param", "pool_size=10", "--param", "n_queries=3"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "'sentence-transformers/all-mpnet-base-v2' (hub id) cannot be loaded" in err
    assert "--param caption_model=/path/to/all-mpnet-base-v2" in err and "--param caption_model=minilm" in err


def test_image_root_may_be_the_release_archive(tmp_path):
    """nlphuji/flickr30k ships flickr30k-images.zip beside flickr_annotations_30k.csv; it is read in place."""
    import tarfile
    import zipfile

    recs, root = export_layouts(tmp_path, n=6)
    want = {r.image_id: (root / f"{r.image_id}.jpg").read_bytes() for r in recs}
    zpath, tpath, gz = tmp_path / "flickr30k-images.zip", tmp_path / "flickr30k-images.tar", tmp_path / "images.tar.gz"
    with zipfile.ZipFile(zpath, "w") as zf:
        for r in recs[1:]:                                  # recs[0] is missing from the archives
            zf.write(root / f"{r.image_id}.jpg", f"flickr30k-images/{r.image_id}.jpg")
    with tarfile.open(tpath, "w") as tf, tarfile.open(gz, "w:gz") as tgz:
        for r in recs[1:]:
            tf.add(root / f"{r.image_id}.jpg", f"flickr30k-images/{r.image_id}.jpg")
            tgz.add(root / f"{r.image_id}.jpg", f"flickr30k-images/{r.image_id}.jpg")
    for archive in (zpath, tpath):
        with pytest.raises(FlickrSourceError) as exc:
            read_annotations_csv(str(tmp_path / "flickr_annotations_30k.csv"), str(archive))
        assert re.search(rf"line 2: field 'filename': image file .*{archive.name}!{recs[0].image_id}\.jpg does not "
                         "exist", one_line(exc))
        from mmbench.data.drops import DropLog

        log = DropLog("images")
        got = read_annotations_csv(str(tmp_path / "flickr_annotations_30k.csv"), str(archive), drops=log)
        assert log.dropped == 1 and {r.image_id: r.read()[0] for r in got} == {k: v for k, v in want.items()
                                                                              if k != recs[0].image_id}
    with pytest.raises(FlickrSourceError, match="compressed tar archive; unpack it first"):
        read_karpathy(str(tmp_path / "dataset_flickr30k.json"), str(gz))
    (tmp_path / "notes.txt").write_text("not an archive")
    with pytest.raises(FlickrSourceError, match="neither a .zip nor a .tar"):
        read_token(str(tmp_path / "results_20130124.token"), str(tmp_path / "notes.txt"))
    damaged = bytearray(zpath.read_bytes())
    start = damaged.find(want[recs[1].image_id][200:260])
    damaged[start:start + 40] = bytes(40)
    zpath.write_bytes(bytes(damaged))
    first = next(r for r in read_token(str(tmp_path / "results_20130124.token"), str(zpath), drops=DropLog("x"))
                 if r.image_id == recs[1].image_id)
    with pytest.raises(FlickrSourceError) as exc:
        first.read()
    assert re.search(rf"cannot read .*flickr30k-images\.zip!{recs[1].image_id}\.jpg \(damaged archive member",
                     one_line(exc))


def test_unloadable_hf_dataset_is_a_one_line_error(tmp_path):
    bad = tmp_path / "flickr.parquet"
    bad.write_bytes(b"PAR1 but not really parquet")
    with pytest.raises(FlickrSourceError) as exc:
        read_hf(str(bad))
    assert re.search(r"dataset '.*flickr\.parquet' \[test\] cannot be loaded \(.*\); give a local parquet file",
                     one_line(exc))


@pytest.mark.parametrize("images, message", [
    ({"a": 1}, r"field 'images' is a JSON dict, not a list"),
    (["x"], r"images\[0\] lacks field \(the record is not an object\)"),
    ([{"filename": 7, "sentences": []}], r"images\[0\]: field 'filename' is 7, not a file name"),
    ([{"filename": "a.jpg", "sentences": "A dog ."}], r"images\[0\]: field 'sentences' is not a list of objects"),
    ([{"filename": "a.jpg", "sentences": [{"tokens": ["a"]}]}], r"images\[0\]: field 'sentences' is not a list"),
])
def test_karpathy_records_of_the_wrong_type_name_record_and_field(tmp_path, images, message):
    path = tmp_path / "dataset_flickr30k.json"
    path.write_text(json.dumps({"images": images}))
    with pytest.raises(FlickrSourceError) as exc:
        read_karpathy(str(path), str(tmp_path))
    assert re.search(rf"dataset_flickr30k\.json: {message}", one_line(exc))
