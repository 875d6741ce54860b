"""Content-addressed media files of a pool set (images and video frames).

A file's name is the SHA-256 of its bytes, so identical images are stored once and a
pool set's content hash covers its media. Reading reports the file and the item on error.
"""
from __future__ import annotations

import hashlib
import io
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from PIL import Image as PILImage, UnidentifiedImageError

from .documents import Image


class MediaError(RuntimeError):
    """A media file is missing or unreadable; the message names the file and the item."""


def default_mode(base: int) -> int:
    """`base` (0o666 for files, 0o777 for folders) less the process umask, as `open` and `mkdir` would give."""
    mask = os.umask(0o022)
    os.umask(mask)
    return base & ~mask


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary file in the same folder, then rename: readers never see half a file.

    The file gets the usual permissions (mkstemp's are owner-only), so shared pool sets and results stay readable.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, default_mode(0o666))
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


@dataclass
class MediaStore:
    """The `media/` folder of a pool set."""

    root: Path

    def __post_init__(self) -> None:
        self.root = Path(self.root)

    def put_bytes(self, data: bytes, suffix: str) -> str:
        digest = hashlib.sha256(data).hexdigest()
        ref = f"{digest[:2]}/{digest}{suffix}"
        path = self.root / ref
        if not path.exists():
            atomic_write_bytes(path, data)
        return ref

    def put_image(self, image: PILImage.Image, format: str = "PNG") -> Image:
        """Store a PIL image (PNG, lossless, by default; JPEG for bulky backgrounds); return its segment."""
        buf = io.BytesIO()
        if format == "JPEG":
            image.convert("RGB").save(buf, format="JPEG", quality=90)
            suffix = ".jpg"
        else:
            image.convert("RGB").save(buf, format="PNG")
            suffix = ".png"
        ref = self.put_bytes(buf.getvalue(), suffix)
        return Image(ref=ref, width=image.width, height=image.height)

    def path(self, ref: str) -> Path:
        if ref.startswith("/") or ".." in Path(ref).parts:
            raise MediaError(f"media reference {ref!r} escapes the media folder")
        return self.root / ref

    def load_image(self, ref: str, item: str = "?") -> PILImage.Image:
        path = self.path(ref)
        if not path.is_file():
            raise MediaError(f"missing media file {path} (referenced by {item})")
        try:
            with PILImage.open(path) as img:
                img.load()
                return img.convert("RGB")
        except (UnidentifiedImageError, OSError, SyntaxError) as exc:
            raise MediaError(f"corrupt media file {path} (referenced by {item}): {exc}") from exc
