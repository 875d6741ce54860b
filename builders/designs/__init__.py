"""Each task's design constants, shared by its spec (`mmbench.tasks`) and its builder; plain values only."""

POOL_LENGTHS = (8192, 16384, 32768)  # the pool lengths Multi-Source Reasoning and Logical Summarization share
