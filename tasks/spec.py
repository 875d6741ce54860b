"""Typed task metadata: what a task is, how it is built, and how it is scored."""
from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from mmbench.tasks.param_types import param_type_problem


@dataclass(frozen=True)
class TaskSpec:
    """A task, declared: its identity, how its pool set is built, checked and scored.

    Attributes:
        name: the task's name (`--task NAME`).
        version: the task version, recorded in every pool set and result; change it when the data changes.
        description: one line shown by `mmbench list tasks`.
        reference: the design the task follows.
        builder: `"module:function"`, called as `function(source, out, seed, **params)` and returning a `PoolSet`.
        sources: the sources it builds from; `"sample"` is built in and offline, the others read real data.
        length_bins: the names of its length bins, in order.
        difficulties: its pool difficulties, e.g. `("easy", "hard")`.
        modalities: the modalities its documents hold.
        metrics: the metrics the run summary shows.
        main_score: the metric reported as the task's main score (and as mteb's `main_score`).
        summary_axes: the metadata fields the run summary breaks the main score down by.
        strata: the metadata fields whose values are the strata of the task's design (e.g. anchor kind x
            background): effective context is read within each stratum, against its own reference.
        default_params: builder parameters used unless `--param` overrides them.
        source_params: each real-source parameter with its help text.
        validator: the module holding `INVARIANTS` and `check(ps, checked)`, re-run by `mmbench validate`.
        services: builder keyword -> `"module:function"` the task hands its builder (e.g. a model loader), so
            builders import no model code; never part of the build's parameters or content hash.
        fresh_params: builder parameters the overfitting test's fresh draws add (Visual Grounding: new needles).
        fresh_renews: what a fresh draw renews that a model could have memorised from the public draw.
    """

    name: str
    version: str
    description: str
    reference: str                      # the design the task follows
    builder: str                        # "module:function"(source, out, seed, **params) -> PoolSet
    sources: tuple[str, ...]            # "sample" is built in and offline; others read real data
    length_bins: tuple[str, ...]
    difficulties: tuple[str, ...] = ("easy",)
    modalities: tuple[str, ...] = ("text",)
    metrics: tuple[str, ...] = ("precision_at_1", "recall_at_5", "mrr_at_10", "ndcg_at_10")
    main_score: str = "precision_at_1"
    summary_axes: tuple[str, ...] = ("length_bin",)  # the run summary prints the main score by these
    strata: tuple[str, ...] = ()        # the design's strata (effective context is read within each)
    default_params: dict[str, Any] = field(default_factory=dict)
    source_params: dict[str, str] = field(default_factory=dict)  # real-source parameter -> help text
    validator: str = ""                 # module with INVARIANTS and check(ps, checked) (mmbench.builders.parts.validity)
    # builder keyword -> "module:function" the task hands its builder (e.g. a model loader), so that
    # builders import no model code; never part of the build's parameters or its content hash
    services: dict[str, str] = field(default_factory=dict)
    # opt-in long bins past the default build (64K, 128K tokens): built only when asked for with
    # `--param lengths=[...]`, so default sample builds and their content hashes never include them
    long_lengths: tuple[int, ...] = ()
    # the overfitting test's fresh draws: builder parameters they add (e.g. new needles) and, in words, what a
    # fresh draw renews that a model could have memorised from the public draw
    fresh_params: dict[str, Any] = field(default_factory=dict)
    fresh_renews: str = ""

    @property
    def long_bins(self) -> tuple[str, ...]:
        from mmbench.data.tokens import length_label

        return tuple(length_label(n) for n in self.long_lengths)

    def build(self, source: str, out: Path, seed: int = 0, **params: Any):
        """Build the pool set from `source` into `out`: the builder gets the services, then the default
        parameters overridden by `params`."""
        fn: Callable[..., Any] = _resolve(self.builder)
        known = self.param_names(fn)
        unknown = sorted(set(params) - known - set(self.services)) if known is not None else []
        if unknown:
            raise UnknownBuildParameter(f"task {self.name} has no build parameter {unknown[0]!r}; its parameters: "
                                        f"{', '.join(sorted(known or ()))}")
        services = {key: _resolve(ref) for key, ref in self.services.items() if key not in params}
        return fn(source=source, out=Path(out), seed=seed, **services, **{**self.default_params, **params})

    def check_param_types(self, params: dict[str, Any]) -> None:
        """Refuse, naming it, a parameter whose value (as parsed from the command line) does not fit the builder's
        annotation: `--param lengths=abc` is an error about `lengths`, not a bare int() error mid-build."""
        fn = _resolve(self.builder)
        for key, value in params.items():
            problem = param_type_problem(fn, key, value)
            if problem is not None:
                raise UnknownBuildParameter(f"task {self.name}: {problem}")

    def param_names(self, fn: Callable[..., Any] | None = None) -> set[str] | None:
        """The keyword parameters `--param` may set (the builder's own, less source/out/seed and the services),
        or None when the builder takes any keyword."""
        params = inspect.signature(fn or _resolve(self.builder)).parameters.values()
        if any(p.kind is p.VAR_KEYWORD for p in params):
            return None
        named = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        return named - {"source", "out", "seed"} - set(self.services)


class UnknownBuildParameter(ValueError):
    """A build parameter the task's builder does not take; the message lists the ones it does."""


def _resolve(ref: str) -> Callable[..., Any]:
    module, func = ref.split(":")
    return getattr(importlib.import_module(module), func)
