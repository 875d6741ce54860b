"""mmbench: benchmarks for long-context multimodal embedding models.

The public API is imported on first use, so `import mmbench` stays light (no torch, no mteb)::

    mmbench.get_task(name)            the task's TaskSpec
    mmbench.list_tasks()              task names (built-in and plugins)
    mmbench.load_model(name, **opts)  an EmbeddingModel (registry name, module:Factory, mteb:<name>, folder, hub id)
    mmbench.evaluate(model, tasks)    an in-memory Evaluation (per-query tables, aggregates, .write(folder))
    mmbench.register_model / register_task   add user models and tasks
    mmbench.EmbeddingModel, ModelCard, Document, Text, Image, Video, TaskSpec
"""

__version__ = "0.1.0"

_EXPORTS = {
    "get_task": "mmbench.api", "list_tasks": "mmbench.api", "load_model": "mmbench.api", "evaluate": "mmbench.api",
    "Evaluation": "mmbench.api", "Result": "mmbench.api", "ResultsExist": "mmbench.api",
    "register_model": "mmbench.models.registry", "register_task": "mmbench.tasks", "resolve_tasks": "mmbench.tasks",
    "TaskSpec": "mmbench.tasks.spec",
    "EmbeddingModel": "mmbench.models.base", "ModelCard": "mmbench.models.base",
    "Document": "mmbench.data.documents", "Text": "mmbench.data.documents", "Image": "mmbench.data.documents",
    "Video": "mmbench.data.documents",
    "ModelUnavailable": "mmbench.running.model_loading",
}
__all__ = ["__version__", *_EXPORTS]  # noqa: PLE0604 - the names of _EXPORTS are strings


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mmbench' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
