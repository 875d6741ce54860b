"""`mmbench export --format mteb DIR --out OUT`: a pool set in another tool's layout.

`--format card` (re)writes the pool set's own dataset card in place (pool sets built before cards
existed), so `datasets.load_dataset(DIR, "queries")` works there too.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from mmbench.common.errors import CLIError

FORMATS = ("mteb", "card")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="write a pool set in another tool's layout (mteb's HF retrieval layout)")
    p.add_argument("poolset", type=Path, help="pool set folder (as built by `mmbench build`)")
    p.add_argument("--format", choices=FORMATS, default="mteb",
                   help="mteb: corpus/queries/qrels/top_ranked parquet + dataset card, loadable by mteb's loader "
                        "(needs --out); card: write the pool set's own README.md dataset card in place")
    p.add_argument("--out", type=Path, help="folder to write for --format mteb (new, empty or an earlier export)")
    p.add_argument("--overwrite", action="store_true", help="replace an earlier export at --out")
    p.add_argument("--limit", type=int, default=None,
                   help="export only the items `mmbench run --limit N` evaluates (default: all items)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed, as `mmbench run --seed`: of the --limit sample, and corpus ids are ordered so mteb "
                        "breaks equal scores the way mmbench does with this seed (default: 0)")
    p.add_argument("--accept-image-loss", action="store_true",
                   help="export documents holding several images although an mteb row keeps the first only; the "
                        "loss is recorded in mteb_export.json (without it such a pool set is refused)")
    p.add_argument("--seen-by", metavar="MODEL", default=None,
                   help="write each document as MODEL sees it in `mmbench run` (its modalities, middle-truncated to its "
                        "window), so a stock mteb encoder reads the text mmbench feeds that model (recorded as "
                        "seen_by in mteb_export.json)")
    p.set_defaults(func=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    from mmbench.data.dataset_card import add_card
    from mmbench.interop.mteb_folder import ExportError, write_mteb_layout
    from mmbench.data.poolset import PoolSetError, load_poolset

    if args.format == "mteb" and args.out is None:
        raise CLIError("--format mteb needs --out FOLDER")
    try:
        ps = load_poolset(args.poolset, verify=True)
        if args.format == "card":
            print(f"{add_card(ps.root, ps.manifest)}: dataset card for {ps.task} v{ps.task_version} "
                  f"(datasets.load_dataset(folder, 'queries'|'candidates'|'pools'))")
            return 0
        seen_by = None
        if args.seen_by is not None:
            from mmbench.running.model_loading import ModelUnavailable, load_model_explained

            try:
                seen_by = load_model_explained(args.seen_by, {})
            except ModelUnavailable as exc:
                raise CLIError(str(exc)) from None
        summary = write_mteb_layout(ps, args.out, overwrite=args.overwrite, limit=args.limit, seed=args.seed,
                                    accept_image_loss=args.accept_image_loss, seen_by=seen_by)
    except (PoolSetError, ExportError, ValueError) as exc:
        raise CLIError(str(exc)) from None
    n = {part: sum(s.get(part, 0) for sub in summary["subsets"].values() for s in sub.values())
         for part in ("corpus", "queries", "qrels")}
    dropped = summary["dropped_by_text_image_mapping"]
    print(f"{args.out}: mteb task {summary['task']} (main score {summary['main_score']}), "
          f"{n['queries']} queries, {n['corpus']} corpus rows, {n['qrels']} qrels, {summary['media_files']} media files")
    if summary.get("seen_by"):
        seen = summary["seen_by"]
        print(f"  as {seen['model']['name']} sees them: {seen['truncated']} of {seen['documents']} documents "
              f"middle-truncated to {seen['window_tokens']} tokens, {seen['with_unseen_modalities']} with content it "
              "does not take left out")
    if dropped["dropped_images"]:
        print(f"  loss accepted (--accept-image-loss): mteb encoders see one text and one image per row, so "
              f"{dropped['dropped_images']} further images of {summary['image_loss']['documents']} documents are "
              "listed in `media` only (see image_loss in mteb_export.json)")
    return 0
