"""What a model sees of a document: its visible modalities, middle-truncated to its window (or head-truncated).

The result records what was hidden (modalities the model cannot take) and what was cut
(text tokens, images, frames), so results say it instead of losing it silently.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from mmbench.data.documents import Document, Image, Text, Video
from mmbench.models.base import EmbeddingModel
from mmbench.data.truncation import TruncationReport, strategy_of, truncate


@dataclass
class SeenRecord:
    unified_tokens: int
    seen_tokens: int
    truncated: bool = False
    cut_text_tokens: int = 0
    dropped_images: int = 0
    dropped_frames: int = 0
    unseen_modalities: list[str] = field(default_factory=list)
    unseen_images: int = 0
    unseen_frames: int = 0
    counts_exact: bool = True  # False: a very long text was tokenised at its ends only (cut count estimated)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def model_view(doc: Document, model: EmbeddingModel) -> tuple[Document, SeenRecord]:
    card = model.card
    visible = [s for s in doc.segments if s.kind in card.modalities]
    hidden = [s for s in doc.segments if s.kind not in card.modalities]
    unseen = sorted({s.kind for s in hidden})
    budget = card.max_tokens
    if budget is None:
        kept, report = visible, None
    else:
        kept, report = _fitted(visible, budget, model, strategy_of(card.settings))
    if report is None:
        seen_tokens = _approx_tokens(kept, model)
    else:
        seen_tokens = report.tokens_after
    record = SeenRecord(
        unified_tokens=doc.tokens, seen_tokens=seen_tokens,
        truncated=bool(report and report.truncated),
        cut_text_tokens=report.cut_text_tokens if report else 0,
        dropped_images=report.dropped_images if report else 0,
        dropped_frames=report.dropped_frames if report else 0,
        unseen_modalities=unseen,
        unseen_images=sum(1 for s in hidden if isinstance(s, Image)),
        unseen_frames=sum(len(s.frames) for s in hidden if isinstance(s, Video)),
        counts_exact=report.exact if report else True,
    )
    # no metadata: a model reads the content, never how a document was built (its record, its image id ...)
    return Document(id=doc.id, segments=kept, tokens=doc.tokens, meta={}), record


def _fitted(visible: list, budget: int, model: EmbeddingModel, strategy: str) -> tuple[list, TruncationReport]:
    """`visible` truncated to `budget`, the joins between texts paid for; then, while the view the model really
    renders exceeds its window (`rendered_excess`: tokenisation across a cut or a join that the per-segment counts
    do not see), truncated again to a budget smaller by the excess."""
    def cut(to: int) -> tuple[list, TruncationReport]:
        return truncate(visible, to, model.budget_tokenizer(), model.visual_tokens, model.video_tokens, strategy,
                        model.text_join_tokens())

    kept, report = cut(budget)
    excess = model.rendered_excess(kept)
    while excess > 0 and budget > 0:
        budget = max(0, budget - excess)
        kept, report = cut(budget)
        excess = model.rendered_excess(kept)
    return kept, report


def _approx_tokens(segments: list, model: EmbeddingModel) -> int:
    """Tokens of an untruncated view: text by the model's tokenizer (whitespace words if none)."""
    tok = model.budget_tokenizer()
    total = 0
    for s in segments:
        if isinstance(s, Text):
            total += len(tok.encode(s.text)) if tok else len(s.text.split())
        elif isinstance(s, Image):
            total += model.visual_tokens(s.width, s.height)
        elif isinstance(s, Video):
            total += model.video_tokens(len(s.frames), s.width, s.height)
    return total
