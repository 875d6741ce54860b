"""Flickr30k hard-negative text-to-image retrieval: the design constants its task spec and its builder share (name, version, sources).

Plain values, so that naming the task (`mmbench.tasks`) does not import the builder and its dependencies.
A builder change that changes what it writes bumps TASK_VERSION here.
"""

TASK_NAME = "flickr_hard_negatives"
TASK_VERSION = "1.4"   # 1.4: one stored candidate order per candidate set, drawn from (seed, the sorted set) and applied to it (issue 33); 1.3: provenance columns (source record, image, needle, ...) stored apart from the document tables (issue 24); 1.2: opaque ids, candidates in a seeded order, leak audit (issue 24); before: 1.1: machine-independent records (candidate order no longer follows similarity order), crescents drawn right, articles
SOURCES = ("sample", "hf", "karpathy", "token", "csv")
