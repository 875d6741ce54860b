"""Temporal Summarization (MMLongEmbed Task 4): the design constants its task spec and its builder share (name, version, length bins, sources, difficulties).

Plain values, so that naming the task (`mmbench.tasks`) does not import the builder and its dependencies.
A builder change that changes what it writes bumps TASK_VERSION here.
"""

TASK_NAME = "temporal_summarization"
TASK_VERSION = "2.3"   # 2.3: one stored candidate order per candidate set, drawn from (seed, the sorted set) and applied to it (issue 33); 2.2: provenance columns (source record, image, needle, ...) stored apart from the document tables (issue 24); 2.1: opaque ids, candidates in a seeded order, leak audit (issue 24)
LENGTHS = (8192, 16384, 32768)
SOURCES = ("sample", "activitynet", "youku")
DIFFICULTIES = ("easy", "hard")
