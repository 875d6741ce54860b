"""Multi-Source Reasoning (MMLongEmbed Task 2): retrieve the context whose evidence chain answers the question.

HotpotQA and MMDocRAG contexts expanded to 8K/16K/32K unified tokens; Hard distractors are the
same contexts with one key evidence span (and any unit restating its fact) replaced by
length-matched coherent text; builds are checked by mmbench.builders.checks.multi_source_reasoning.
"""
from mmbench.builders.designs.multi_source_reasoning import LENGTHS, TASK_NAME, TASK_VERSION
from mmbench.data.tokens import length_label

from mmbench.tasks.spec import TaskSpec

TASK = TaskSpec(
    name=TASK_NAME,
    version=TASK_VERSION,
    description="Find the expanded context whose intact evidence chain answers the question (Easy/Hard per length)",
    reference="MMLongEmbed (seed 002), Task 2 and length-stratified pooling",
    builder="mmbench.builders.multi_source_reasoning:build",
    sources=("sample", "real"),
    length_bins=tuple(length_label(n) for n in LENGTHS),
    difficulties=("easy", "hard"),
    modalities=("text", "image"),
    metrics=("precision_at_1", "recall_at_5", "mrr_at_10", "ndcg_at_10"),
    summary_axes=("length_bin", "difficulty"),
    strata=("dataset", "difficulty"),
    default_params={"lengths": LENGTHS},
    source_params={
        "hotpotqa": "HotpotQA distractor file (original JSON, or the hub's parquet/JSONL), or hf:hotpotqa/hotpot_qa@<commit>",
        "mmdocrag": "MMDocRAG dev/evaluation JSONL (text_quotes, img_quotes, gold_quotes)",
        "mmdocrag_images": "folder the MMDocRAG img_path values are relative to",
        "filler": "optional plain-text file of unrelated filler (default: Python's Language Reference)",
        "auditor_model": "optional chat model for the LLM query auditor (with auditor_base_url)",
        "auditor_base_url": "OpenAI-compatible base URL, e.g. http://localhost:8000/v1",
        "audit_hard": "true: also ask the auditor whether each Hard variant still answers its query (drop if so)",
    },
    validator="mmbench.builders.checks.multi_source_reasoning",
    long_lengths=(65536, 131072),   # opt-in; the sample's filler reaches them (docs/long-contexts.md),
    fresh_renews=("the filler each context is expanded with and the evidence span each Hard variant swaps; with a real source also which questions (records) make the draw. The sample source keeps its questions: a model that memorised them is not renewed away"),
)
