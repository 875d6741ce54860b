"""Small Flickr30k sources written in the published layouts, from the offline sample (shared by the Flickr tests)."""
from __future__ import annotations

import csv
import json

from mmbench.builders.sources.sample_flickr import sample_flickr


def export_layouts(tmp_path, n=30):
    """The sample written out in the real layouts: image folder, .token, Karpathy JSON, CSVs, parquet."""
    recs = sample_flickr(n, seed=0)
    root = tmp_path / "images"
    root.mkdir()
    for r in recs:
        (root / f"{r.image_id}.jpg").write_bytes(r.read()[0])
    karpathy = {"images": [{"filename": f"{r.image_id}.jpg", "split": "test" if i % 3 == 0 else "train",
                            "sentences": [{"raw": c, "tokens": c.split()} for c in r.captions]}
                           for i, r in enumerate(recs)]}
    (tmp_path / "dataset_flickr30k.json").write_text(json.dumps(karpathy))
    with open(tmp_path / "results.csv", "w") as fh:
        fh.write("image_name| comment_number| comment\n")
        for r in recs:
            for k in (4, 2, 0, 1, 3):  # out of order on purpose: comment_number decides
                fh.write(f"{r.image_id}.jpg| {k}| {r.captions[k]}\n")
    with open(tmp_path / "flickr_annotations_30k.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["raw", "sentids", "split", "filename", "img_id"])
        for i, r in enumerate(recs):
            w.writerow([json.dumps(list(r.captions)), "[]", "test", f"{r.image_id}.jpg", i])
    with open(tmp_path / "results_20130124.token", "w") as fh:  # the original release: name.jpg#k<TAB>caption
        for k in (3, 0, 4, 1, 2):  # the caption number decides the order, not the line order
            for r in recs:
                fh.write(f"{r.image_id}.jpg#{k}\t{r.captions[k]}\n")
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"image": [{"bytes": (root / f"{r.image_id}.jpg").read_bytes(), "path": f"{r.image_id}.jpg"}
                                for r in recs],
                      "caption": [list(r.captions) for r in recs], "filename": [f"{r.image_id}.jpg" for r in recs]})
    pq.write_table(table, tmp_path / "flickr.parquet")
    return recs, root


def one_line(exc_info) -> str:
    """The error message, which must be a single line."""
    msg = str(exc_info.value)
    assert "\n" not in msg, msg
    return msg
