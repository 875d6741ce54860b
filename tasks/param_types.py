"""Build parameters checked against the builder's own annotations before the build starts, so a bad
`--param lengths=abc` is refused naming the parameter and the type it wants (not a bare `int()` error from
deep inside a builder). Only the plain types builders use are checked: int, float, bool, str, None, their
unions, and sequences of them; any other annotation is left to the builder."""
from __future__ import annotations

import collections.abc
import types
import typing
from typing import Any, Callable

_NAMES = {int: "an integer", float: "a number", bool: "true or false", str: "a string", type(None): "none"}


def param_type_problem(fn: Callable[..., Any], key: str, value: Any) -> str | None:
    """Why `value` does not fit the annotation of `fn`'s parameter `key` (None when it fits or is not checked)."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # noqa: BLE001 - an annotation that cannot be resolved is not checked
        return None
    if key not in hints:
        return None
    wanted = _describe(hints[key])
    if wanted is None or _fits(hints[key], value):
        return None
    return f"--param {key}: expected {wanted}, got {value!r}"


def _fits(tp: Any, value: Any) -> bool:
    origin = typing.get_origin(tp)
    if tp is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_fits(t, value) for t in typing.get_args(tp))
    if origin in (list, tuple, collections.abc.Sequence):
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        if not isinstance(value, (list, tuple)):
            return False
        return not args or all(_fits(args[0], v) for v in value)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp in (bool, str, type(None)):
        return isinstance(value, tp)
    return True   # not a type this module checks


def _describe(tp: Any) -> str | None:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        parts = [_describe(t) for t in typing.get_args(tp)]
        return None if None in parts else " or ".join(p for p in parts if p)
    if origin in (list, tuple, collections.abc.Sequence):
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        inner = _describe(args[0]) if args else "values"
        if inner is None:
            return None
        plural = {"an integer": "integers", "a number": "numbers", "a string": "strings"}.get(inner, inner)
        return f"a list of {plural}, e.g. [256,512]" if plural in ("integers", "numbers") else f"a list of {plural}"
    return _NAMES.get(tp)
