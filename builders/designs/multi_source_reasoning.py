"""Multi-Source Reasoning (MMLongEmbed Task 2): the design constants its task spec and its builder share (name, version).

Plain values, so that naming the task (`mmbench.tasks`) does not import the builder and its dependencies.
A builder change that changes what it writes bumps TASK_VERSION here.
"""
from mmbench.builders.designs import POOL_LENGTHS

TASK_NAME = "multi_source_reasoning"
TASK_VERSION = "1.5"   # 1.5 (issue 43): the relevant candidate mirrors one of its Hard variants (as many units, of the same kind, the nearest change in word shingles), so no family has a centre per dataset (HotpotQA-layout Hard medoid 0.183 -> 0.133, MMDocRAG-layout 0.042 -> 0.171 at chance 0.125, seeds 0-9 at 2K); a Hard pool holds families of at most half its candidates (three candidates per query refused); 1.4 (issue 33): one stored candidate order per candidate set, drawn from (seed, the sorted set) and applied to it; the MMDocRAG-layout sample's title line names no company; Hard variants of comparison and yes/no questions remove what decides the comparison; the relevant candidate carries one replaced span outside the chain and Hard pools hold whole families of one shape, so no family has a centre; 1.3: provenance columns (source record, image, needle, ...) stored apart from the document tables (issue 24); 1.2: opaque ids, candidates in a seeded order, leak audit (issue 24); before: 1.1: Hard variants are checked to break the chain; replacements end at word boundaries
LENGTHS = POOL_LENGTHS
