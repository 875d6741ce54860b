"""The thresholds a backend parity certificate is judged by (light to import: the CLI states them in its help).

Two layers. A certificate states the thresholds `verify-backend` was given (`--min-cosine`,
`--min-top1-agreement`); mmbench's protocol sets a minimum for each comparison kind below which no stated
threshold counts (`PROTOCOL_MINIMUMS`). The thresholds applied are the stricter of the two, so a certificate
can be made stricter than the protocol, never looser: one that passes only by thresholds below the
protocol's is FAILED wherever it is read (attach, submit, board), whatever it states about itself.
"""
from __future__ import annotations

from typing import Any

DEFAULT_MIN_COSINE = 0.99          # every probe item's vectors from the two paths at least this close
DEFAULT_MIN_TOP1_AGREEMENT = 1.0   # share of the probe's retrieval pairs whose top-1 the two paths agree on

# comparison kind -> (minimum cosine, minimum top-1 agreement) of the protocol. `batching`: the same weights in
# the same dtype fed whole batches, so only padding and batch neighbours move the last bits: the vectors must be
# as close as the default asks and no top-1 may change. `dtype` (the same weights loaded in another dtype),
# `options` (other loading options: attention implementation, quantisation) and `backend` (a served engine or
# an API) change the arithmetic itself: bfloat16 against float32 keeps a healthy model's probe cosines above
# 0.99, so 0.98 leaves room for long inputs and still fails a wrong pooling, template or truncation (those give
# cosines near 0.9 or below); one of the probe's four retrieval pairs may change its top-1, not two.
PROTOCOL_MINIMUMS: dict[str, tuple[float, float]] = {
    "batching": (0.99, 1.0),
    "dtype": (0.98, 0.75),
    "options": (0.98, 0.75),
    "backend": (0.98, 0.75),
}
# a certificate or run block that does not say its kind (written before kinds were recorded): the loosest minimum
UNKNOWN_KIND_MINIMUM = (min(v[0] for v in PROTOCOL_MINIMUMS.values()), min(v[1] for v in PROTOCOL_MINIMUMS.values()))


def protocol_minimum(kind: object) -> tuple[float, float]:
    """(minimum cosine, minimum top-1 agreement) the protocol sets for a comparison `kind`."""
    return PROTOCOL_MINIMUMS.get(kind, UNKNOWN_KIND_MINIMUM) if isinstance(kind, str) else UNKNOWN_KIND_MINIMUM


def comparison_kind(second_kind: object, reference_settings: object = None, second_settings: object = None) -> str | None:
    """The protocol's comparison kind of a certificate's second path: `verify-backend`'s 'batching', 'api'
    (-> 'backend') or 'options' (-> 'dtype' when the two paths' dtypes differ). None: not one mmbench writes."""
    if second_kind == "batching":
        return "batching"
    if second_kind == "api":
        return "backend"
    if second_kind == "options":
        ref = reference_settings if isinstance(reference_settings, dict) else {}
        other = second_settings if isinstance(second_settings, dict) else {}
        return "dtype" if ref.get("dtype") != other.get("dtype") else "options"
    return None


def looser_than_protocol(kind: str, min_cosine: float, min_top1_agreement: float) -> str | None:
    """Why thresholds asked of `verify-backend` are below the protocol's minimum for `kind` (None when they are not)."""
    need_cos, need_top1 = protocol_minimum(kind)
    low = [f"{flag} {got:g} is below the protocol minimum {need:g}" for flag, got, need in
           (("--min-cosine", min_cosine, need_cos), ("--min-top1-agreement", min_top1_agreement, need_top1))
           if got < need]
    if not low:
        return None
    return (f"{'; '.join(low)} for {kind} comparisons (thresholds may be stricter than mmbench's protocol, never "
            "looser; see docs/verify-backend.md)")


def _number(value: object) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value == value and abs(value) != float("inf")
    return float(value) if ok else None   # type: ignore[arg-type]


def applied_thresholds(kind: object, min_cosine: object, min_top1_agreement: object) -> tuple[float | None, float | None]:
    """The thresholds a certificate is judged by: each stated one raised to the protocol's minimum for `kind`
    (a missing or non-finite stated threshold stays None, which fails)."""
    need_cos, need_top1 = protocol_minimum(kind)
    cos, top1 = _number(min_cosine), _number(min_top1_agreement)
    return (None if cos is None else max(cos, need_cos), None if top1 is None else max(top1, need_top1))


def verdict(cosine_min: object, top1_agreement: object, min_cosine: object, min_top1_agreement: object) -> bool:
    """Whether measurements clear thresholds. A missing or non-finite measurement or threshold fails. Called with
    `applied_thresholds` wherever a certificate is read (attach, submit, board), so neither a `passed` flag edited
    by hand nor a threshold below the protocol's is believed."""
    got_cos, got_top1 = _number(cosine_min), _number(top1_agreement)
    need_cos, need_top1 = _number(min_cosine), _number(min_top1_agreement)
    return (None not in (got_cos, got_top1, need_cos, need_top1)
            and got_cos >= need_cos and got_top1 >= need_top1)   # type: ignore[operator]


def _block_thresholds(block: dict) -> tuple[Any, Any]:
    # a block written before it recorded `min_top1_agreement` is judged by the default
    return block.get("min_cosine"), block.get("min_top1_agreement", DEFAULT_MIN_TOP1_AGREEMENT)


def block_verdict(block: dict) -> bool:
    """The protocol's verdict on the block a run's results carry (`mmbench.backend_certificate`): its measurements
    against its stated thresholds raised to the protocol minimum of its `comparison` kind."""
    return verdict(block.get("cosine_min"), block.get("top1_agreement"),
                   *applied_thresholds(block.get("comparison"), *_block_thresholds(block)))


def block_stated_verdict(block: dict) -> bool:
    """The verdict by the block's own stated thresholds (what an honest writer recorded as `passed`)."""
    return verdict(block.get("cosine_min"), block.get("top1_agreement"), *_block_thresholds(block))


def forged(stated: object, recomputed: bool, by_own_thresholds: bool | None = None) -> str | None:
    """Why a stated `passed` cannot be believed: it matches neither the protocol's verdict (`recomputed`) nor, for
    a certificate written before the protocol's minimums, the verdict by its own thresholds. None when it does."""
    if stated is recomputed or (by_own_thresholds is not None and stated is by_own_thresholds):
        return None
    return (f"passed: states {stated!r}, but its own measurements and thresholds give "
            f"{'passed' if recomputed else 'failed'}; refused as forged (run `mmbench verify-backend` again)")


def describe_block(block: object) -> str:
    """What a board shows of a run's certificate: the protocol's verdict, the measured values and the thresholds
    applied, e.g. 'passed (cosine min 0.99998, needs 0.99; top-1 agreement 1.000, needs 1; batching comparison)';
    'NONE' for a run without one."""
    if not isinstance(block, dict):
        return "NONE"
    need_cos, need_top1 = applied_thresholds(block.get("comparison"), *_block_thresholds(block))
    cos, top1 = _number(block.get("cosine_min")), _number(block.get("top1_agreement"))
    shown = lambda v, fmt: "n/a" if v is None else format(v, fmt)  # noqa: E731
    ok = block.get("passed") is True and block_verdict(block)
    kind = block.get("comparison") if isinstance(block.get("comparison"), str) else "unrecorded"
    return (f"{'passed' if ok else 'FAILED'} (cosine min {shown(cos, '.5f')}, needs {shown(need_cos, 'g')}; top-1 "
            f"agreement {shown(top1, '.3f')}, needs {shown(need_top1, 'g')}; {kind} comparison)")
