"""Why a submission was refused: every problem names the field and the reason."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.field}: {self.reason}"


class SubmissionRejected(ValueError):
    """A submission failed validation; `problems` lists every reason found."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems[:50])
        more = f"\n  ... and {len(self.problems) - 50} more" if len(self.problems) > 50 else ""
        super().__init__(f"submission rejected ({len(self.problems)} problem(s)):\n{lines}{more}")

    def fields(self) -> list[str]:
        return [p.field for p in self.problems]


class DuplicateSubmission(SubmissionRejected):
    """The same model identity is already on the board for this task version."""
