"""mmbench: benchmarks for long-context multimodal embedding models."""

__version__ = "0.1.0"
