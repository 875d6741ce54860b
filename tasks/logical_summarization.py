"""Logical Summarization (MMLongEmbed Task 3): a summary retrieves the whole long document it summarizes.

GovReport reports (text) and MMLongBench page-image documents pooled by their own length into
8K/16K/32K bins, the ranges (4K, 8K], (8K, 16K], (16K, 32K] unified tokens (`length_control=padding`
pads every report to each bin it fits instead, as version 1 did); Hard distractors replace the
first 25 %, last 25 % or middle 50 % with BM25 look-alike paragraphs (text) or unseen consecutive
pages of the same document's extended version (pages).
"""
from mmbench.builders.designs.logical_summarization import LENGTHS, TASK_NAME, TASK_VERSION
from mmbench.data.tokens import length_label

from mmbench.tasks.spec import TaskSpec

TASK = TaskSpec(
    name=TASK_NAME,
    version=TASK_VERSION,
    description="Find the long document (report text or page images) a summary describes (Easy/Hard per length)",
    reference="MMLongEmbed (seed 002), Task 3 and length-stratified pooling",
    builder="mmbench.builders.logical_summarization:build",
    sources=("sample", "real"),
    length_bins=tuple(length_label(n) for n in LENGTHS),
    difficulties=("easy", "hard"),
    modalities=("text", "image"),
    metrics=("precision_at_1", "recall_at_5", "mrr_at_10", "ndcg_at_10"),
    summary_axes=("length_bin", "difficulty"),
    strata=("dataset", "difficulty"),
    default_params={"lengths": LENGTHS},
    source_params={
        "govreport": "GovReport parquet/JSONL with `report` (or `document`) and `summary`, or hf:<dataset id>@<commit>[?split=test]",
        "mmlongbench": "JSONL with `id`, `summary`, `pages`, `extended_pages` (page image paths), optional "
                       "`page_texts` (one string per page, for the summary filter)",
        "mmlongbench_images": "folder the page image paths are relative to",
        "filler": "optional plain-text file of unrelated filler (default: Python's Language Reference)",
        "max_reports": "read at most this many records of each source",
        "length_control": "natural (default: a candidate is a whole document whose own length is in the bin) "
                          "or padding (version 1: every report padded at its end to each bin it fits)",
        "max_filler_share": "natural: largest share of filler that may lift a short document into a bin "
                            "(default 0.25)",
    },
    validator="mmbench.builders.checks.logical_summarization",
    fresh_renews=("the filler text reports are padded with and its placement; with a real source also which reports make the draw"),
)
