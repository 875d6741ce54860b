"""Logical Summarization (MMLongEmbed Task 3): the design constants its task spec and its builder share (name, version).

Plain values, so that naming the task (`mmbench.tasks`) does not import the builder and its dependencies.
A builder change that changes what it writes bumps TASK_VERSION here.
"""
from mmbench.builders.designs import POOL_LENGTHS

TASK_NAME = "logical_summarization"
TASK_VERSION = "2.5"   # 2.5 (issue 43): the sample summaries state no subject or paragraph count (the stated paragraph count named the only candidate with that many text segments in every GovReport pool); 2.4 (issue 33): the three Hard variants of a report share one look-alike replacement and Hard pools hold whole families, so the report is not the centre of its family (query-blind medoid P@1 on the sample's Hard pools 0.920 -> 0.122, chance 0.125); 2.3: one stored candidate order per candidate set, drawn from (seed, the sorted set) and applied to it; the sample summaries name each part by words of their own instead of quoting topic names and sentences (query 4-grams found the report in every pool, Hard ones included) (issue 33); 2.2: provenance columns (source record, image, needle, ...) stored apart from the document tables (issue 24); 2.1: opaque ids, candidates in a seeded order, leak audit (issue 24)
LENGTHS = POOL_LENGTHS
