"""`mmbench verify-backend`: a parity certificate between a model's reference path and a second path."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from mmbench.cli.commands_core import float_in, load_includes, model_options
from mmbench.common.errors import CLIError
from mmbench.running.parity_thresholds import (DEFAULT_MIN_COSINE, DEFAULT_MIN_TOP1_AGREEMENT, PROTOCOL_MINIMUMS,
                                               looser_than_protocol)

unit_interval = float_in(-1.0, 1.0, what="a number between -1 and 1")
share = float_in(0.0, 1.0, what="a share between 0 and 1")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify-backend", help="certify that a second backend (a server, a dtype, other batches) "
                                              "gives the reference vectors on mmbench's probe set",
                       description="Encodes the probe set shipped with mmbench (short and long text, images, "
                                   "interleaved text and images, video frames, retrieval pairs) through the model's "
                                   "own adapter one item at a time, and through a second path; reports per-item "
                                   "cosine (minimum, median), top-1 agreement on the retrieval pairs and pass/fail. "
                                   "Exit 0: passed; 1: failed; 2: unusable options.")
    p.add_argument("--model", required=True, help="the reference model: registered name, local path or hub id")
    p.add_argument("--include", action="append", default=[], type=Path, metavar="FILE",
                   help="Python file to import first; it may register models (mmbench.register_model)")
    p.add_argument("--device", default=None, help="device of the reference model, e.g. cuda, cpu (default: the adapter's)")
    p.add_argument("--dtype", default=None, help="weight dtype of the reference model (default: the adapter's)")
    p.add_argument("--model-path", default=None, help="local folder with the reference model's weights")
    p.add_argument("--attn-implementation", default=None, help="transformers attention implementation of the reference")
    p.add_argument("--trust-remote-code", action="store_true", help="let transformers run the model repository's own code")
    p.add_argument("--model-option", action="append", default=[], metavar="KEY=VALUE",
                   help="another option of the reference model's adapter (see `mmbench list models --options`)")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--server", metavar="URL",
                     help="second path: an OpenAI-compatible embeddings server (e.g. vLLM), base URL such as "
                          "http://localhost:8000/v1, reached through mmbench's openai adapter")
    how.add_argument("--second-option", action="append", default=[], metavar="KEY=VALUE",
                     help="second path: the same model loaded with these options replacing the reference's, e.g. "
                          "--second-option dtype=bfloat16")
    p.add_argument("--server-model", default=None, help="model name the server expects (default: --model)")
    p.add_argument("--server-option", action="append", default=[], metavar="KEY=VALUE",
                   help="another option of the openai adapter for --server, e.g. api_key_env=MY_KEY")
    floors = "; ".join(f"{k} {v[0]:g}" for k, v in PROTOCOL_MINIMUMS.items())
    p.add_argument("--min-cosine", type=unit_interval, default=DEFAULT_MIN_COSINE,
                   help="pass only if every item's cosine between the two paths is at least this (default: "
                        f"%(default)s; never below the protocol minimum per comparison: {floors})")
    floors = "; ".join(f"{k} {v[1]:g}" for k, v in PROTOCOL_MINIMUMS.items())
    p.add_argument("--min-top1-agreement", type=share, default=DEFAULT_MIN_TOP1_AGREEMENT,
                   help="pass only if this share of retrieval pairs has the same top-1 document under both paths "
                        f"(default: %(default)s; never below the protocol minimum per comparison: {floors})")
    p.add_argument("--out", type=Path, default=Path("backend-certificate.json"),
                   help="where the certificate (JSON) is written (default: %(default)s); `mmbench run "
                        "--backend-certificate FILE` attaches it to a run")
    p.set_defaults(func=cmd_verify_backend)


def second_path(args: argparse.Namespace, reference, ref_options: dict):
    """(model, kind, description) of the second path the options name; whole reversed batches by default."""
    from mmbench.cli.commands_core import parse_params
    from mmbench.running.model_loading import ModelUnavailable, load_model_explained

    if args.server:
        from mmbench.models.api_openai import OpenAIEmbeddingModel

        extra = parse_params(args.server_option, "--server-option")
        model = OpenAIEmbeddingModel(model=args.server_model or args.model, base_url=args.server,
                                     **{"images": True, "max_tokens": None, **extra})
        return model, "api", f"OpenAI-compatible server {model.card.settings['base_url']} (model {model.model})"
    if args.second_option:
        changed = parse_params(args.second_option, "--second-option")
        try:
            model = load_model_explained(args.model, {**ref_options, **changed})
        except ModelUnavailable as exc:
            raise CLIError(str(exc)) from None
        shown = ", ".join(f"{k}={v}" for k, v in sorted(changed.items()))
        return model, "options", f"the same adapter loaded with {shown}, one item per batch"
    return reference, "batching", "the same model, each role's items in one batch in reverse order"


def requested_kind(args: argparse.Namespace) -> str:
    """The comparison kind the options ask for (before any model loads; dtype and other options share a minimum)."""
    if args.server:
        return "backend"
    if args.second_option:
        return "dtype" if any(o.split("=", 1)[0].strip() == "dtype" for o in args.second_option) else "options"
    return "batching"


def cmd_verify_backend(args: argparse.Namespace) -> int:
    from mmbench.data.media import atomic_write_bytes
    from mmbench.running.model_loading import ModelUnavailable, load_model_explained
    from mmbench.running.verify_backend import certificate

    looser = looser_than_protocol(requested_kind(args), args.min_cosine, args.min_top1_agreement)
    if looser is not None:
        raise CLIError(looser)
    load_includes(args)
    options = model_options(args, args.model)
    try:
        reference = load_model_explained(args.model, options)
    except ModelUnavailable as exc:
        raise CLIError(str(exc)) from None
    second, kind, description = second_path(args, reference, options)
    cert = certificate(reference, second, kind, description, min_cosine=args.min_cosine,
                       min_top1_agreement=args.min_top1_agreement)
    atomic_write_bytes(args.out, (json.dumps(cert, indent=1, sort_keys=True) + "\n").encode("utf-8"))
    print(f"reference: {reference.card.name} ({cert['reference']['path']})")
    print(f"second:    {description}")
    for item in cert["items"]:
        cos = "n/a (vectors of different widths)" if item["cosine"] is None else f"{item['cosine']:.6f}"
        print(f"  {item['id']:18s} {item['role']:8s} cosine {cos}")
    for side, skipped in cert["skipped"].items():
        for item, why in skipped.items():
            print(f"  {item:18s} skipped by the {side} path: {why}")
    med = "n/a" if cert["cosine_median"] is None else f"{cert['cosine_median']:.6f}"
    low = "n/a" if cert["cosine_min"] is None else f"{cert['cosine_min']:.6f}"
    top1 = "n/a" if cert["top1_agreement"] is None else f"{cert['top1_agreement']:.3f}"
    applied = cert["thresholds"]
    print(f"cosine min {low}, median {med}; top-1 agreement {top1} over {len(cert['pairs'])} pairs "
          f"(thresholds: cosine >= {applied['min_cosine']:g}, agreement >= {applied['min_top1_agreement']:g}; "
          f"{cert['comparison']} comparison)")
    print(("PASSED" if cert["passed"] else "FAILED: " + "; ".join(cert["reasons"])) + f"  (certificate: {args.out})")
    return 0 if cert["passed"] else 1
