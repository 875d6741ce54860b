"""The fresh-draw overfitting test: a model on the public draw of a task and on fresh draws from a secret seed.

The fresh draws' seeds come from the secret (SHA-256 of "mmbench-fresh:<secret>:<i>"), so whoever keeps the
secret can rebuild them and nobody else can predict them. The public draw is the task built with the
public seed and the same source and parameters. Fresh-draw results are written with their own protocol id
(mmbench.running.draws.mark_fresh) under <out>/fresh, apart from the public-draw results under <out>/public;
the gap and its test are `mmbench.evaluators.stats.overfit_gap`, its noise pooled from the model's own fresh draws and
the references (other models' draws reports) with each draw's item standard error as the floor.

Commitment: before any fresh draw exists the keeper publishes sha256("mmbench-commit:<salt>:<secret>") with a random
salt (`commitment_record`), in the public draw's record and on the board; at reveal the secret and salt must give the
same hash (`check_commitment`), so nobody can pick the secret, and with it the fresh draws, after seeing them.
"""
from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence


from mmbench.data.poolset import PoolSet
from mmbench.evaluators.stats.draw_spread import mean_se
from mmbench.evaluators.stats.overfit_gap import DEFAULT_ALPHA, DrawVariance, overfit_gap
from mmbench.models.base import EmbeddingModel
from mmbench.results.store import RunResults
from mmbench.running.draws import run_over_draws
from mmbench.tasks import TaskSpec

DEFAULT_FRESH = 5


def fresh_seeds(secret: str, n: int, public: int) -> list[int]:
    """`n` distinct build seeds derived from `secret`, none equal to the public seed."""
    if not str(secret):
        raise ValueError("the secret seed must not be empty")
    seeds: list[int] = []
    i = 0
    while len(seeds) < n:
        digest = hashlib.sha256(f"mmbench-fresh:{secret}:{i}".encode()).digest()
        seed = int.from_bytes(digest[:4], "big") % (2 ** 31)
        if seed != public and seed not in seeds:
            seeds.append(seed)
        i += 1
    return seeds


def commit(secret: str, salt: str) -> str:
    """The commitment to a secret seed: sha256 of "mmbench-commit:<salt>:<secret>" (hex)."""
    return hashlib.sha256(f"mmbench-commit:{salt}:{secret}".encode()).hexdigest()


def commitment_record(task: str, public_seed: int, public_hash: str, secret: str, salt: str | None = None) -> dict[str, Any]:
    """What the keeper publishes before building any fresh draw: the salted hash of the secret and the public draw
    it belongs to (the salt is published with it; without the secret the hash tells nothing)."""
    if not str(secret):
        raise ValueError("the secret seed must not be empty")
    salt = salt or secrets.token_hex(16)
    return {"kind": "mmbench.overfit.commitment", "task": task, "public_seed": int(public_seed),
            "public_content_hash": public_hash, "salt": salt, "commitment": commit(secret, salt),
            "committed_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def check_commitment(record: dict[str, Any], secret: str, task: str, public_hash: str) -> None:
    """Refuse a reveal whose secret, task or public draw is not the one committed to (ValueError naming it)."""
    try:
        salt, digest = str(record["salt"]), str(record["commitment"])
    except (KeyError, TypeError):
        raise ValueError("the commitment record has no salt or commitment field") from None
    if record.get("task") != task:
        raise ValueError(f"the commitment is for task {record.get('task')!r}, not {task!r}")
    if record.get("public_content_hash") != public_hash:
        raise ValueError(f"the commitment is for public draw {str(record.get('public_content_hash'))[:16]}, "
                         f"not {public_hash[:16]}")
    if not hmac.compare_digest(commit(secret, salt), digest):
        raise ValueError("the secret seed does not match the commitment published before the fresh draws: "
                         "the fresh draws are not the committed ones")


def score_of(run: RunResults, metric: str) -> float:
    return score_and_se(run, metric)[0]


def score_and_se(run: RunResults, metric: str) -> tuple[float, float]:
    """A run's score (mean of the per-item metric) and its standard error (sd / sqrt(n))."""
    mean, se, _ = mean_se(run.per_query[metric])
    return mean, se


def overfit_test(model: EmbeddingModel, requested: str, spec: TaskSpec, public: PoolSet, fresh: Sequence[PoolSet],
                 out: Path, options: Any, metric: str, alpha: float = DEFAULT_ALPHA,
                 announce: Callable[[str], Any] | None = None, reference: Sequence[DrawVariance] = (),
                 commitment: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run `model` on the public draw and the fresh draws; the public − fresh gap and its test, JSON-ready.
    `reference`: other estimates of the task's draw variance; `commitment`: the checked commitment record."""
    pub = run_over_draws(model, requested, spec, [public], Path(out) / "public", options, announce=announce)[0]
    runs = run_over_draws(model, requested, spec, fresh, Path(out) / "fresh", options, fresh=True, announce=announce)
    return overfit_numbers(model.card.name, spec, pub, runs, metric, alpha, reference, commitment)


def overfit_numbers(model: str, spec: TaskSpec, pub: RunResults, runs: Sequence[RunResults], metric: str,
                    alpha: float = DEFAULT_ALPHA, reference: Sequence[DrawVariance] = (),
                    commitment: dict[str, Any] | None = None) -> dict[str, Any]:
    """The public − fresh gap of the model `model` and its test, JSON-ready, from its run on the public draw
    (`pub`) and its runs on the fresh draws (`runs`)."""
    for run in (pub, *runs):
        if metric not in run.per_query.columns:
            raise ValueError(f"per-query metric {metric!r} is missing from {run.root}")
    p_score, p_se = score_and_se(pub, metric)
    fresh_scores = [score_and_se(r, metric) for r in runs]
    gap = overfit_gap(p_score, [m for m, _ in fresh_scores], alpha, public_se=p_se,
                      fresh_se=[se for _, se in fresh_scores], reference=reference)
    return {"kind": "mmbench.overfit", "task": spec.name, "model": model, "metric": metric,
            "public": {"content_hash": pub.content_hash, "protocol_id": pub.info.get("protocol_id"),
                       "score": gap.public, "se": p_se, "results": str(pub.root)},
            "fresh": [{"content_hash": r.content_hash, "protocol_id": r.info.get("protocol_id"),
                       "score": m, "se": se, "results": str(r.root)} for r, (m, se) in zip(runs, fresh_scores)],
            "renews": spec.fresh_renews, "references": [r.source for r in reference],
            "commitment": None if commitment is None else {**commitment, "verified": True},
            "gap": gap.to_dict()}


def not_flagged_words(g: dict[str, Any]) -> str:
    """What "not flagged" means, with the gap the test would have caught (never read as "not overfitted")."""
    return (f"not flagged — the test catches a gap of {g['detectable_gap']:.4f} with {g['power']:.0%} power at "
            f"{g['n_fresh']} fresh draws; a smaller one could go unseen (not flagged is not \"not overfitted\")")


def overfit_markdown(data: dict[str, Any]) -> str:
    g = data["gap"]
    head = [f"# mmbench overfit: {data['model']} on {data['task']}", "",
            f"Metric {data['metric']}. Public draw `{data['public']['content_hash'][:16]}` (protocol "
            f"`{data['public']['protocol_id']}`): {g['public']:.4f}. {g['n_fresh']} fresh draws from the secret seed "
            f"(their own protocol ids, never joined with public results): mean {g['fresh_mean']:.4f}, "
            f"sd {g['fresh_sd']:.4f}.", ""]
    if data.get("renews"):
        head += [f"A fresh draw of {data['task']} renews {data['renews']}.", ""]
    c = data.get("commitment")
    head += [f"Commitment `{c['commitment'][:16]}…` (made {c['committed_at']}) checked: the secret is the one committed "
             "to before the fresh draws existed." if c else
             "No commitment was published before the fresh draws: nothing shows the secret was fixed beforehand.", ""]
    if not g["judged"]:
        return "\n".join([*head, f"Gap public − fresh: {g['gap']:+.4f}; {g['reason']} (the fresh scores do not vary "
                          "and no standard errors or reference draws give the noise).", ""])
    if g["flagged"]:
        verdict = ("**flagged**: the public score is higher than draw variance and item noise explain (the model may "
                   "have been fitted to the public draw)")
    elif g["gap"] < g["expected_low"]:
        verdict = "not flagged: the public score is lower than the fresh draws' (no sign of overfitting)"
    else:
        verdict = not_flagged_words(g)
    refs = data.get("references") or []
    noise = (f"noise: sd of the gap {g['se_gap']:.4f} (item part {g['item_se']:.4f}, draw sd beyond items "
             f"{g['excess_sd']:.4f} pooled from the fresh draws and {len(refs)} reference draw set(s)), {g['df']:.1f} df"
             if g.get("item_se") is not None else f"noise: the fresh scores' own sd, {g['df']:.0f} df")
    return "\n".join([*head,
        f"Gap public − fresh: {g['gap']:+.4f}, {1 - g['alpha']:.0%} CI [{g['ci_low']:+.4f}, {g['ci_high']:+.4f}]; "
        f"the gap draw variance alone gives lies in [{g['expected_low']:+.4f}, {g['expected_high']:+.4f}] "
        f"(p = {format(g['p_value'], '.3g')}; {noise}).", "",
        verdict, ""])
