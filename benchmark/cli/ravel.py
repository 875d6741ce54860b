"""`mmbench ravel …`: RAVEL vision-encoder evaluation.

The scoring mathematics live in mmbench.evaluators.ravel; calibration sources and feature arrays are read by
mmbench.builders.sources (calibration_pairs, shapes_sample, feature_arrays), the calibration manifest is
mmbench.data.calibration, encoders and LLMs load through mmbench.models.feature_models, and features are
extracted and cached (mmbench.data.embedding_cache) by mmbench.running.ravel_features. Bad input is one line,
exit 2.

Subcommands: calibrate · score · baselines · sweep · correlate · selection · ckax · flops · tiny-models.
Encoders / LLMs are given as ``NAME=PATH`` (or just PATH; the folder name becomes the name);
precomputed arrays as ``--features NAME=FILE.npy|npz`` and ``--text-features NAME=FILE.npy``.
"""
from __future__ import annotations

import argparse
import gc
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from mmbench.cli.commands_core import nonnegative_int
from mmbench.common.errors import CLIError

if TYPE_CHECKING:  # pandas and numpy load inside the commands: `mmbench --help` needs neither
    from collections.abc import Iterator

    import numpy as np
    import pandas as pd

    from mmbench.data.calibration import Calibration


# ----------------------------------------------------------------------------- helpers
def _named(spec: str) -> tuple[str, str]:
    if "=" in spec:
        name, path = spec.split("=", 1)
        return name.strip(), path.strip()
    return Path(spec.rstrip("/")).name, spec


def _floats(s: str) -> list[float]:
    return [float(v) for v in s.split(",") if v.strip()]


def _ints(s: str) -> list[int]:
    return [int(float(v)) for v in s.split(",") if v.strip()]


def _add_calibration_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("calibration pairs")
    g.add_argument("--manifest", help="reuse a manifest written by `ravel calibrate` (exact pairs)")
    g.add_argument("--source", default="sample", help="llava-lcs | coco | karpathy | flickr | pairs | sample")
    g.add_argument("--json", dest="json_path", help="source JSON (llava-lcs, coco, karpathy)")
    g.add_argument("--image-root", help="image folder of the source")
    g.add_argument("--pairs", dest="pairs_file", help="CSV/JSONL with image,text columns (source 'pairs')")
    g.add_argument("--pool-size", type=int, default=5000, help="size of the generated 'sample' pool")
    g.add_argument("--n", type=int, default=1000, help="number of pairs drawn (default: %(default)s)")
    g.add_argument("--seed", type=nonnegative_int, default=42, help="sampling seed (default: %(default)s)")


def _calibration(args: argparse.Namespace) -> Calibration:
    from mmbench.builders.sources import calibration_pairs as P
    from mmbench.data.calibration import read_manifest, sample_pairs
    from mmbench.data.drops import DropLog

    if args.manifest:
        return read_manifest(args.manifest)
    drops = DropLog("items")
    pool = P.load_source(args.source, json_path=args.json_path, image_root=args.image_root,
                         pairs_file=args.pairs_file, pool_size=args.pool_size, drops=drops)
    if drops.dropped:  # say what the pool leaves out, with the reason
        reasons = ", ".join(f"{r} ×{n} (e.g. {drops.examples[r][0]})" for r, n in drops.reasons.most_common())
        print(f"skipped {drops.dropped} of {drops.read} {drops.what} of {args.json_path}: {reasons}", file=sys.stderr)
    cal = sample_pairs(pool, min(args.n, len(pool)) if args.source == "sample" else args.n, args.seed, args.source)
    P.check_images(cal)
    return cal


def _add_model_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("models and features")
    g.add_argument("--encoder", action="append", default=[], metavar="NAME=PATH",
                   help="vision encoder (transformers folder or hub id); repeatable")
    g.add_argument("--features", action="append", default=[], metavar="NAME=FILE",
                   help="precomputed visual patch features (.npy (n,P,d) or .npz with patches[,lengths]); repeatable")
    g.add_argument("--llm", action="append", default=[], metavar="NAME=PATH", help="target language model; repeatable")
    g.add_argument("--text-features", action="append", default=[], metavar="NAME=FILE",
                   help="precomputed text features (.npy (n,d_t)); repeatable")
    g.add_argument("--layer", default="last", help="vision layer: 'last' (default) or a hidden_states index")
    g.add_argument("--text-layer", type=int, default=-2, help="LLM hidden_states index (default: %(default)s, the penultimate layer)")
    g.add_argument("--text-pool", choices=("mean", "last"), default="mean",
                   help="LLM text feature: mean over real tokens (RAVEL, default) or the last real token "
                        "(the paper's post-processing diagnostic)")
    g.add_argument("--device", default="cpu", help="torch device for feature extraction and scoring, e.g. cuda")
    g.add_argument("--batch-size", type=int, default=16, help="images per vision-encoder forward pass")
    g.add_argument("--cache-dir", default="mmbench_cache/ravel", help="feature cache ('' disables)")
    g.add_argument("--online", action="store_true", help="allow hub downloads (default: local files only)")


def _needs_calibration(args) -> bool:
    return bool(args.encoder) or bool(args.llm)


def _iter_text(args: argparse.Namespace, cal: Calibration | None) -> Iterator[tuple[str, np.ndarray]]:
    from mmbench.builders.sources.feature_arrays import read_text_array
    from mmbench.models.feature_models import load_feature_model
    from mmbench.running.ravel_features import extract_text

    for spec in args.text_features:
        name, path = _named(spec)
        yield name, read_text_array(path)
    for spec in args.llm:
        name, path = _named(spec)
        model = load_feature_model("llm-hidden", name, path, online=args.online, device=args.device,
                                   layer=args.text_layer, pool=args.text_pool)
        assert cal is not None  # _needs_calibration
        feats = extract_text(model, cal, cache_root=args.cache_dir or None)
        del model
        gc.collect()
        yield name, feats


def _layer(value: str) -> str | int:
    if value == "last":
        return value
    try:
        return int(value)
    except ValueError:
        raise CLIError(f"--layer {value!r}: expected 'last' or a hidden_states index (an integer)") from None


def _iter_visual(args: argparse.Namespace, cal: Calibration | None
                 ) -> Iterator[tuple[str, np.ndarray, np.ndarray | None]]:
    from mmbench.builders.sources.feature_arrays import read_patch_array
    from mmbench.models.feature_models import load_feature_model
    from mmbench.running.ravel_features import extract_visual

    for spec in args.features:
        name, path = _named(spec)
        x, lengths = read_patch_array(path)
        yield name, x, lengths
    layer = _layer(args.layer)
    for spec in args.encoder:
        name, path = _named(spec)
        enc = load_feature_model("vision-patches", name, path, online=args.online, device=args.device, layer=layer)
        assert cal is not None  # _needs_calibration
        feats = extract_visual(enc, cal, batch_size=args.batch_size, cache_root=args.cache_dir or None)
        del enc
        gc.collect()
        yield name, feats, None


def _load_all(args: argparse.Namespace) -> tuple[Calibration | None, list[tuple[str, np.ndarray]]]:
    if not (args.encoder or args.features) or not (args.llm or args.text_features):
        raise CLIError("need at least one --encoder/--features and one --llm/--text-features")
    _layer(args.layer)  # a bad --layer is named before any model loads
    cal = _calibration(args) if _needs_calibration(args) else None
    texts = list(_iter_text(args, cal))
    return cal, texts


def _write(df: pd.DataFrame, out: str | None) -> None:
    if out:
        from mmbench.data.media import atomic_write_bytes

        text = df.to_json(orient="records", indent=1) if out.endswith(".json") else df.to_csv(index=False)
        atomic_write_bytes(Path(out), text.encode("utf-8"))
        print(f"wrote {out}", file=sys.stderr)


def _print(df: pd.DataFrame) -> None:
    import pandas as pd

    with pd.option_context("display.max_rows", 500, "display.width", 200, "display.float_format", "{:.4f}".format):
        print(df.to_string(index=False))


# ----------------------------------------------------------------------------- commands
def cmd_calibrate(args) -> int:
    cal = _calibration(args)
    cal.write_manifest(args.out)
    print(f"drew {len(cal)} of {cal.pool_size} pairs from {cal.source!r} (seed {cal.seed}); "
          f"fingerprint {cal.fingerprint()} → {args.out}")
    return 0


def cmd_score(args) -> int:
    import pandas as pd

    from mmbench.evaluators.ravel import methods as M

    try:
        methods = M.parse_methods(args.methods)
    except ValueError as exc:
        raise CLIError(f"--methods: {exc}") from None
    cal, texts = _load_all(args)
    if cal is not None and args.out:
        cal.write_manifest(Path(args.out).with_suffix(".manifest.jsonl"))
    rows = []
    for enc_name, patches, lengths in _iter_visual(args, cal):
        for llm_name, text in texts:
            if len(text) != len(patches):
                raise CLIError(f"{enc_name}: {len(patches)} images vs {llm_name}: {len(text)} texts (features of "
                               "different calibration sets?)")
            k = min(args.k, len(text) - 1)
            row = {"encoder": enc_name, "llm": llm_name, "n": len(text), "k": k, "eps": args.eps}
            for m in methods:
                row[m] = M.compute(m, patches, text, lengths=lengths, k=k, eps=args.eps, q=args.abtt_q,
                                   device=args.device)
            if "ravel" in methods:
                row["chance"] = k / (len(text) - 1)
            rows.append(row)
    df = pd.DataFrame(rows)
    _print(df)
    _write(df, args.out)
    return 0


def cmd_sweep(args) -> int:
    import pandas as pd

    from mmbench.evaluators.ravel import sweeps

    cal, texts = _load_all(args)
    rows = []
    for enc_name, patches, lengths in _iter_visual(args, cal):
        for llm_name, text in texts:
            base = {"encoder": enc_name, "llm": llm_name}
            if args.ks:
                rows += [{**base, **r} for r in sweeps.sweep_k(patches, text, _ints(args.ks), eps=args.eps,
                                                                lengths=lengths, device=args.device)]
            if args.epss:
                rows += [{**base, **r} for r in sweeps.sweep_eps(patches, text, _floats(args.epss), k=args.k,
                                                                  lengths=lengths, device=args.device)]
            if args.ns:
                rows += [{**base, **r} for r in sweeps.sweep_n(patches, text, _ints(args.ns), k=args.k, eps=args.eps,
                                                                lengths=lengths, device=args.device)]
            if args.ablation:
                k = min(args.k, len(text) - 1)
                abl = sweeps.patch_pooled_ablation(patches, text, k=k, eps=args.eps, lengths=lengths, device=args.device)
                rows += [{**base, "param": "ablation", "value": name, "score": s} for name, s in abl.items()]
    df = pd.DataFrame(rows)
    _print(df)
    _write(df, args.out)
    return 0


def _merged(args):
    from mmbench.evaluators.ravel import correlate as C
    from mmbench.running.ravel_inputs import load_scores

    for flag, path in (("--scores", args.scores), ("--ground-truth", args.ground_truth)):
        if path is not None and not Path(path).is_file():  # a typo is the user's to fix: exit 2, one line
            raise CLIError(f"{flag} {path}: no such file")
    try:
        scores = load_scores(args.scores, score_column=args.score_column, encoder_column=args.encoder_column,
                               llm_column=args.llm_column)
    except (OSError, ValueError) as exc:
        raise CLIError(f"--scores {args.scores}: {' '.join(str(exc).split())}") from None
    gt = _ground_truth(args.ground_truth)
    try:
        merged = C.merge(scores, gt, allow_missing=args.allow_missing)
    except ValueError as exc:
        raise CLIError(f"--scores {args.scores}: {exc}") from None
    dropped = C.unmatched(scores, gt)
    if dropped:  # only reached with --allow-missing; say what was left out
        print(f"warning: dropped {len(dropped)} scored (encoder, llm) pairs with no ground truth: "
              f"{C.describe_pairs(dropped, shown=len(dropped))}", file=sys.stderr)
    return merged


def _ground_truth(path: str | None) -> pd.DataFrame:
    from mmbench.running.ravel_inputs import load_ground_truth

    try:
        return load_ground_truth(path)
    except (OSError, ValueError) as exc:
        raise CLIError(f"--ground-truth {path or 'Table 7'}: {' '.join(str(exc).split())}") from None


def cmd_correlate(args) -> int:
    from mmbench.evaluators.ravel import correlate as C

    merged = _merged(args)
    res = C.correlate(merged, negate=args.negate)
    print(C.format_table(res))
    _write(res, args.out)
    if args.figure:
        info = _correlation_figure(merged, args.negate, Path(args.figure))
        print(f"wrote {info.path} (panels: {'; '.join(t.splitlines()[0] for t in info.panels)})", file=sys.stderr)
    return 0


def _correlation_figure(merged: pd.DataFrame, negate: bool, path: Path):
    """Predicted vs measured per language model, titled with ρ, its 95 % CI, n and a random predictor's range."""
    from mmbench.evaluators.ravel import correlate as C
    from mmbench.reports import figures
    from mmbench.evaluators.stats.correlation import spearman_ci, spearman_null_interval

    points, summary = [], []
    order = {name: i for i, name in enumerate(C.LLM_SHORT)}  # the panels in the printed table's order
    groups = sorted(merged.groupby("llm", sort=False), key=lambda kv: order.get(kv[0], len(order)))
    for llm, g in groups:
        name = C.LLM_SHORT.get(llm, llm)
        score = -g["score"].to_numpy(float) if negate else g["score"].to_numpy(float)
        points += [{"llm": name, "encoder": e, "score": float(x), "measured": float(y)}
                   for e, x, y in zip(g["encoder"], score, g[C.TARGET])]
        ci = spearman_ci(score, g[C.TARGET].to_numpy(float))
        summary.append({"llm": name, "n": ci.n, "spearman": ci.estimate, "spearman_ci_low": ci.low,
                        "spearman_ci_high": ci.high, "null_interval": spearman_null_interval(ci.n)})
    return figures.correlation_figure(points, summary, path)


def cmd_selection(args) -> int:
    from mmbench.evaluators.ravel import selection as S

    merged = _merged(args)
    if args.negate:
        merged["score"] = -merged["score"]
    curve = S.selection_curve(merged)
    _print(S.summarize(curve))
    _write(curve, args.out)
    return 0


def cmd_ckax(args) -> int:
    import numpy as np
    import pandas as pd

    from mmbench.evaluators.ravel import ckax
    from mmbench.evaluators.ravel import correlate as C
    from mmbench.evaluators.ravel.pooling import pooled

    cal, texts = _load_all(args)
    feats = {name: pooled(x, lengths) for name, x, lengths in _iter_visual(args, cal)}
    gt = _ground_truth(args.ground_truth)
    rows, sweep_rows = [], []
    for llm_name, text in texts:
        canon = C.canonical_llm(llm_name)
        g = gt[gt["llm"] == canon].set_index("encoder")
        names = [n for n in feats if C.canonical_encoder(n) in g.index]
        unlabelled = [n for n in feats if n not in names]
        if unlabelled:
            print(f"warning: {llm_name}: left out {len(unlabelled)} encoder(s) with no ground truth for "
                  f"{canon!r}: {', '.join(unlabelled)}", file=sys.stderr)
        if len(names) < 4:
            raise CLIError(f"CKA-X needs ≥4 encoders with ground truth for {llm_name!r}; found {len(names)}")
        y = np.array([g.loc[C.canonical_encoder(n), "Avg"] for n in names], dtype=float)
        inp = ckax.CKAXInputs.from_features({n: feats[n] for n in names}, text)
        loo = ckax.leave_one_out(inp, y)
        rows += [{"llm": llm_name, "encoder": n, "ckax_loo": p, "Avg": t} for n, p, t in zip(names, loo["predictions"], y)]
        print(f"{llm_name}: CKA-X leave-one-out Spearman {loo['spearman']:.3f}  Pearson {loo['pearson']:.3f}  (M={len(names)})")
        if args.budgets:
            for r in ckax.budget_sweep(inp, y, _ints(args.budgets), repeats=args.repeats):
                sweep_rows.append({"llm": llm_name, **r})
                print(f"  budget {r['budget']:>3}: pooled Spearman {r['pooled_spearman']:.3f}")
    _write(pd.DataFrame(rows), args.out)
    if args.budget_out:
        _write(pd.DataFrame(sweep_rows), args.budget_out)
    return 0


def cmd_flops(args) -> int:
    import pandas as pd

    from mmbench.evaluators.ravel import flops

    rows = []
    for m in (args.methods.split(",") if args.methods else flops.METHODS):
        b = flops.method_flops(m, n=args.n, p=args.p, d_v=args.d_v, d_t=args.d_t, vision_params=args.vision_params,
                               llm_params=args.llm_params, text_tokens=args.text_tokens, k=args.k)
        rows.append({"method": m, "total_flops": b["total"],
                     "scoring_flops": b["total"] - b["vision_forward"] - b["llm_forward"],
                     "breakdown": json.dumps({k: float(f"{v:.4g}") for k, v in b.items() if k != "total"})})
    df = pd.DataFrame(rows)
    with pd.option_context("display.max_colwidth", 200, "display.width", 250):
        print(df.to_string(index=False, formatters={"total_flops": "{:.3e}".format, "scoring_flops": "{:.3e}".format}))
    _write(df, args.out)
    return 0


def cmd_tiny(args) -> int:
    from mmbench.models.ravel_tiny import build_tiny_models

    for k, v in build_tiny_models(args.out).items():
        print(f"{k}={v}")
    return 0


# ----------------------------------------------------------------------------- parser
def _add_scores_args(p):
    p.add_argument("--scores", required=True, help="CSV/JSON(L) with encoder, llm and score columns")
    p.add_argument("--score-column", help="score column (default: score / ravel / final_score)")
    p.add_argument("--ground-truth", help="measured table (default: shipped Table 7, 210 MLLMs)")
    p.add_argument("--encoder-column", help="encoder column (default: encoder / display_name / vision_encoder / name)")
    p.add_argument("--llm-column", help="language model column (default: llm / language_model / lm)")
    p.add_argument("--negate", action="store_true", help="scores are losses (lower = better)")
    p.add_argument("--allow-missing", action="store_true", help="drop scored pairs absent from the ground truth")
    p.add_argument("--out", help="also write the table to this file (.json: JSON records, else CSV)")


def register(subparsers) -> argparse.ArgumentParser:
    ravel = subparsers.add_parser("ravel", help="RAVEL vision-encoder evaluation, baselines, correlation")
    sub = ravel.add_subparsers(dest="ravel_command", metavar="SUBCOMMAND")
    sub.required = True

    p = sub.add_parser("calibrate", help="draw calibration pairs and write their manifest")
    _add_calibration_args(p)
    p.add_argument("--out", required=True, help="manifest file to write (JSONL, one pair a line)")
    p.set_defaults(func=cmd_calibrate)

    for name, default, hlp in (("score", "ravel", "score encoders × LLMs with RAVEL (and any --methods)"),
                               ("baselines", "all", "score with RAVEL and every training-free baseline")):
        p = sub.add_parser(name, help=hlp)
        _add_calibration_args(p)
        _add_model_args(p)
        p.add_argument("--methods", default=default, help="comma list: ravel, mutualnn[-centered|-standardized|"
                       "-pca|-abtt|-whiten], patch-raw, rsa[-whiten], cca[-whiten], cka, gw[-whiten], all, baselines")
        p.add_argument("--k", type=int, default=100, help="neighbours per item (capped at n-1)")
        p.add_argument("--eps", type=float, default=1e-4, help="whitening stabiliser ε added to the eigenvalues")
        p.add_argument("--abtt-q", type=int, default=4, help="top principal components removed by the -abtt variants")
        p.add_argument("--out", help="also write the scores to this file (.json: JSON records, else CSV); "
                       "the pairs' manifest goes beside it")
        p.set_defaults(func=cmd_score)

    p = sub.add_parser("sweep", help="hyperparameter sweeps (k, eps, n) and the patch/pooled ablation")
    _add_calibration_args(p)
    _add_model_args(p)
    p.add_argument("--k", type=int, default=100, help="neighbours per item where k is not swept")
    p.add_argument("--eps", type=float, default=1e-4, help="whitening stabiliser ε where ε is not swept")
    p.add_argument("--ks", help="comma list of k to sweep, e.g. 50,100,150")
    p.add_argument("--epss", help="comma list of ε to sweep, e.g. 0.5e-4,1e-4,5e-4")
    p.add_argument("--ns", help="comma list of pair counts to sweep, e.g. 500,1000")
    p.add_argument("--ablation", action="store_true", help="also score patch-level against pooled features")
    p.add_argument("--out", help="also write the rows to this file (.json: JSON records, else CSV)")
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("correlate", help="Spearman/Pearson of scores against measured MLLM performance")
    _add_scores_args(p)
    p.add_argument("--figure", help="PNG: predicted vs measured per language model, with ρ, its 95 %% CI and n")
    p.set_defaults(func=cmd_correlate)

    p = sub.add_parser("selection", help="top-1 selection curve as the pool grows from the worst encoder")
    _add_scores_args(p)
    p.set_defaults(func=cmd_selection)

    p = sub.add_parser("ckax", help="CKA-X supervised reference (leave-one-out, budget sweep)")
    _add_calibration_args(p)
    _add_model_args(p)
    p.add_argument("--ground-truth", help="labels table (default: shipped Table 7); encoder names must match")
    p.add_argument("--budgets", help="labelled-budget sweep, e.g. 8,16,24,32,40,48,56,64")
    p.add_argument("--repeats", type=int, default=100, help="random labelled subsets drawn per budget")
    p.add_argument("--out", help="write the leave-one-out predictions to this file (.json: JSON records, else CSV)")
    p.add_argument("--budget-out", help="write the --budgets rows to this file (.json: JSON records, else CSV)")
    p.set_defaults(func=cmd_ckax)

    p = sub.add_parser("flops", help="FLOPs accounting per method")
    p.add_argument("--methods", help="comma list of methods (default: all of them)")
    p.add_argument("--n", type=int, default=1000, help="image-text pairs scored")
    p.add_argument("--p", type=int, default=576, help="patch tokens per image")
    p.add_argument("--d-v", type=int, default=1024, help="vision feature dimension")
    p.add_argument("--d-t", type=int, default=2048, help="text feature dimension")
    p.add_argument("--k", type=int, default=100, help="neighbours per item")
    p.add_argument("--vision-params", type=float, default=3.0e8, help="vision encoder parameters (default: %(default)g)")
    p.add_argument("--llm-params", type=float, default=1.7e9, help="language model parameters (default: %(default)g)")
    p.add_argument("--text-tokens", type=float, default=64, help="tokens per caption")
    p.add_argument("--out", help="also write the table to this file (.json: JSON records, else CSV)")
    p.set_defaults(func=cmd_flops)

    p = sub.add_parser("tiny-models", help="write tiny random vision encoders + LLM (offline demo)")
    p.add_argument("--out", required=True, help="folder to write the models into")
    p.set_defaults(func=cmd_tiny)
    return ravel
