"""Visual Grounding (MMLongEmbed Task 1): the design constants its task spec and its builder share (name, version, length bins, depths).

Plain values, so that naming the task (`mmbench.tasks`) does not import the builder and its dependencies.
A builder change that changes what it writes bumps TASK_VERSION here.
"""

TASK_NAME = "visual_grounding"
TASK_VERSION = "1.4"   # 1.4: one stored candidate order per candidate set, drawn from (seed, the sorted set) and applied to it (issue 33); 1.3: provenance columns (source record, image, needle, ...) stored apart from the document tables (issue 24); 1.2: opaque ids, candidates in a seeded order, leak audit (issue 24); before: 1.1: crescents and checkered spheres drawn right, "an orange", entity-free haystacks
LENGTHS = (256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
DEPTHS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
