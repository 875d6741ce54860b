"""The listwise ranking prompt: a system instruction, an introduction with the query and the
number of images, the numbered images, and a closing instruction asking for a JSON array.

The wording is mmbench's own (version `PROMPT_VERSION`). A user file replaces it: a JSON object
with `system`, `intro`, `outro` and optionally `label`; `{query}`, `{n}` and (in `label`) `{id}`
are filled in. A file's version is its name plus a hash of its bytes, recorded with every run.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

PROMPT_VERSION = "mmbench-listwise-1"
FIELDS = ("system", "intro", "outro")


@dataclass(frozen=True)
class RenderedPrompt:
    """One query's prompt; adapters put `labels[i]` before image i."""

    system: str
    intro: str
    labels: list[str]
    outro: str


@dataclass(frozen=True)
class PromptTemplate:
    system: str
    intro: str        # {query}, {n}
    outro: str        # {n}
    label: str = "Image {id}:"
    version: str = PROMPT_VERSION

    def render(self, query: str, n: int) -> RenderedPrompt:
        # Plain replacement, not str.format: captions and user templates may contain braces.
        fill = lambda s: s.replace("{query}", query).replace("{n}", str(n))  # noqa: E731
        return RenderedPrompt(system=fill(self.system), intro=fill(self.intro),
                              labels=[self.label.replace("{id}", str(i)) for i in range(1, n + 1)],
                              outro=fill(self.outro))

    def to_dict(self) -> dict[str, str]:
        return {"version": self.version, "system": self.system, "intro": self.intro, "label": self.label,
                "outro": self.outro}


DEFAULT_PROMPT = PromptTemplate(
    system=("You rank images for a text-to-image search engine. You are given a caption and a set of numbered "
            "candidate images. Order all of the images by how well each one matches the caption: the people, "
            "animals or objects it names, what they are doing, where the scene takes place, and specific details "
            "such as colours, clothing and counts. Answer with a JSON array of image numbers and nothing else."),
    intro=('Caption: "{query}"\n\nBelow are {n} candidate images, each preceded by its number. For every image, '
           "check whether it shows the subjects the caption describes, the action, the setting, and the details "
           "the caption mentions.\n\nCandidate images:"),
    outro=("Now give your ranking as a JSON array containing all {n} image numbers, the best match first and the "
           "worst match last. Use every number exactly once; when two images seem equally good, still put one "
           "before the other. Output the JSON array only."),
)


def load_prompt(path: str | Path | None) -> PromptTemplate:
    """The default prompt, or the one in a JSON file (errors name the file and the field)."""
    if path is None:
        return DEFAULT_PROMPT
    path = Path(path)
    try:
        raw = path.read_bytes()
        data = json.loads(raw.decode("utf-8"))
    except OSError as exc:
        raise ValueError(f"prompt file {path}: cannot read it ({exc})") from None
    except ValueError as exc:
        raise ValueError(f"prompt file {path}: invalid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"prompt file {path}: expected a JSON object with fields {', '.join(FIELDS)}")
    for name in (*FIELDS, "label"):
        if name in data and not isinstance(data[name], str):
            raise ValueError(f"prompt file {path}: field {name!r} must be a string")
    missing = [f for f in FIELDS if not data.get(f)]
    if missing:
        raise ValueError(f"prompt file {path}: missing field(s) {', '.join(missing)}")
    if "{query}" not in data["intro"]:
        raise ValueError(f"prompt file {path}: field 'intro' must contain {{query}}")
    label = data.get("label", DEFAULT_PROMPT.label)
    if "{id}" not in label:
        raise ValueError(f"prompt file {path}: field 'label' must contain {{id}}")
    version = f"file:{path.name}:sha256:{hashlib.sha256(raw).hexdigest()[:12]}"
    return PromptTemplate(system=data["system"], intro=data["intro"], outro=data["outro"], label=label, version=version)
