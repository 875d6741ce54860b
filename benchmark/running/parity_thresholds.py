"""The thresholds a backend parity certificate is judged by (light to import: the CLI states them in its help)."""

DEFAULT_MIN_COSINE = 0.99          # every probe item's vectors from the two paths at least this close
DEFAULT_MIN_TOP1_AGREEMENT = 1.0   # share of the probe's retrieval pairs whose top-1 the two paths agree on


def _number(value: object) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value == value and abs(value) != float("inf")
    return float(value) if ok else None   # type: ignore[arg-type]


def verdict(cosine_min: object, top1_agreement: object, min_cosine: object, min_top1_agreement: object) -> bool:
    """Whether measurements clear thresholds: the one rule by which a certificate passes, applied again wherever
    a certificate is read (attach, submit, board), so a `passed` flag edited by hand is never believed. A missing
    or non-finite measurement or threshold fails."""
    got_cos, got_top1 = _number(cosine_min), _number(top1_agreement)
    need_cos, need_top1 = _number(min_cosine), _number(min_top1_agreement)
    return (None not in (got_cos, got_top1, need_cos, need_top1)
            and got_cos >= need_cos and got_top1 >= need_top1)   # type: ignore[operator]


def block_verdict(block: dict) -> bool:
    """`verdict` of the block a run's results carry (`mmbench.backend_certificate`); a block written before it
    recorded `min_top1_agreement` is judged by the default."""
    return verdict(block.get("cosine_min"), block.get("top1_agreement"), block.get("min_cosine"),
                   block.get("min_top1_agreement", DEFAULT_MIN_TOP1_AGREEMENT))


def forged(stated: object, recomputed: bool) -> str | None:
    """Why a stated `passed` cannot be believed (None when it matches the verdict recomputed from the
    certificate's own measurements and thresholds)."""
    if stated is recomputed:
        return None
    return (f"passed: states {stated!r}, but its own measurements and thresholds give "
            f"{'passed' if recomputed else 'failed'}; refused as forged (run `mmbench verify-backend` again)")
