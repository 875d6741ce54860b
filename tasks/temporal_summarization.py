"""Temporal Summarization (MMLongEmbed Task 4): retrieve the video an ordered event description tells.

Candidates are whole videos at 1 FPS and one standard frame size, pooled into the 8K/16K/32K
bin their own length (= duration × tokens per frame) falls in; Easy distractors are other videos
of the bin, Hard distractors are event-level permutations (reversal, block permutation) of the
target video itself, with the same frames and length.
"""
from mmbench.builders.designs.temporal_summarization import DIFFICULTIES, LENGTHS, SOURCES, TASK_NAME, TASK_VERSION
from mmbench.data.tokens import length_label

from mmbench.tasks.spec import TaskSpec

TASK = TaskSpec(
    name=TASK_NAME,
    version=TASK_VERSION,
    description="Find the video whose events happen in the order the query describes (1-FPS frame sequences)",
    reference="MMLongEmbed (seed 002), Task 4",
    builder="mmbench.builders.temporal_summarization:build",
    sources=SOURCES,
    length_bins=tuple(length_label(n) for n in LENGTHS),
    difficulties=DIFFICULTIES,
    modalities=("text", "video"),
    metrics=("precision_at_1", "recall_at_5", "mrr_at_10", "ndcg_at_10"),
    summary_axes=("length_bin", "difficulty"),
    strata=("dataset", "difficulty"),
    default_params={"lengths": LENGTHS, "distractors": 3},
    source_params={
        "annotations": "dense-caption annotations: ActivityNet Captions JSON ({id: {duration, timestamps, "
                       "sentences}}); Youku: the JSONL written by `mmbench prepare youku` (or the same JSON, or "
                       "JSONL with a video_id field)",
        "video_root": "folder of video files named <id>.<ext> (ActivityNet: also without the 'v_' prefix)",
        "max_videos": "use a seeded sample of this many annotated videos",
        "frame_size": "[width, height] of the one standard frame (multiples of 32; default 448x256 = 112 tokens "
                      "for real sources, 512x512 = 256 for the sample)",
        "length_control": "'duration' (default: each video in the bin of its own length) or 'resolution' (the 1.0 "
                          "rule: every video in every bin, frame size fitted per bin)",
        "allow_missing": "true: build even when more than 10% of the annotated videos are missing or unreadable",
        "videos": "sample source: number of synthetic videos, spread over the bins (default 15)",
        "rewrite": "'rule' (default, offline) or 'llm' (OpenAI-compatible chat API; translates Chinese)",
        "rewrite_base_url": "chat API base URL for rewrite='llm' (key from rewrite_api_key_env, default "
                            "OPENAI_API_KEY)",
        "rewrite_model": "chat model name for rewrite='llm'",
        "rewrite_cache": "JSONL file that stores and reuses chat rewrites (keyed by prompt version, model, captions)",
    },
    validator="mmbench.builders.checks.temporal_summarization",
    long_lengths=(65536, 131072),   # opt-in; the sample's videos reach them (docs/long-contexts.md),
    fresh_renews=("the sample source's synthetic videos; with a real source a seeded sample of the annotated videos (max_videos)"),
)
