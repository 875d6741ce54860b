"""Visual Grounding (MMLongEmbed Task 1): a multimodal needle in a haystack.

25 text and 25 image query–anchor pairs in look-alike families; 8 length bins × 6 depths ×
3 background modalities; each (length, depth) cell is its own 25-candidate corpus. Invariants:
mmbench.builders.checks.visual_grounding.
"""
from mmbench.data.tokens import length_label
from mmbench.builders.designs.visual_grounding import DEPTHS, LENGTHS, TASK_NAME, TASK_VERSION

from mmbench.tasks.spec import TaskSpec

# 64K and 128K tokens: opt-in (`--param lengths=[65536,131072]`); docs/long-contexts.md gives a reduced and a full
# build with their time and disk use
LONG_LENGTHS = (65536, 131072)

TASK = TaskSpec(
    name=TASK_NAME,
    version=TASK_VERSION,
    description="Multimodal needle-in-a-haystack: find the haystack holding the anchor the query asks about",
    reference="MMLongEmbed (seed 002), Task 1",
    builder="mmbench.builders.visual_grounding:build",
    sources=("sample", "real"),
    length_bins=tuple(length_label(n) for n in LENGTHS),
    difficulties=("hard",),
    modalities=("text", "image"),
    metrics=("precision_at_1", "precision_at_5", "recall_at_5", "mrr_at_10", "ndcg_at_10"),
    summary_axes=("length_bin", "depth"),
    strata=("anchor_kind", "background_modality"),
    default_params={"depths": DEPTHS, "lengths": LENGTHS},
    source_params={
        "text_needles": "NeedleBench needles.jsonl (opencompass: `needle`, `retrieval_question`, `arg2`, `language`), or hf:opencompass/NeedleBench@<commit>",
        "image_needles": "MM-NIAH image-needle JSONL (official layout: needle images in `meta.needles`)",
        "image_root": "folder the MM-NIAH image paths are relative to",
        "haystack": "OBELICS parquet with local images (`mmbench prepare obelics` maps its URLs to files)",
        "family_size": "look-alike family size for real needles (default 5: a needle and four look-alikes)",
        "image_descriptor": "how image look-alikes are chosen: thumbnail-histogram (default) or model:NAME",
        "allow_missing": "build even when more than 10 % of a source's records are unusable (counted in the manifest)",
    },
    validator="mmbench.builders.checks.visual_grounding",
    services={"load_model": "mmbench.models.registry:load_model"},
    long_lengths=LONG_LENGTHS,
    fresh_params={"needles": "fresh"},
    fresh_renews=("the needles (new look-alike families, none shared with the public draw) and the haystack windows"),
)
