"""Content-addressed media files of a pool set (images and video frames).

A file's name is the SHA-256 of its bytes, so identical images are stored once and a
pool set's content hash covers its media. Reading reports the file and the item on error.
"""
from __future__ import annotations

import hashlib
import io
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # PIL is imported where an image is read or written: a run from cached vectors reads none
    from PIL import Image as PILImage

from mmbench.data.documents import Image


class MediaError(RuntimeError):
    """A media file is missing or unreadable; the message names the file and the item."""


def default_mode(base: int) -> int:
    """`base` (0o666 for files, 0o777 for folders) less the process umask, as `open` and `mkdir` would give."""
    mask = os.umask(0o022)
    os.umask(mask)
    return base & ~mask


def write_temp_file(path: Path, data: bytes) -> Path:
    """`data` in a fresh hidden sibling of `path` (same folder, so one rename puts it in place), with the
    usual permissions (mkstemp's are owner-only). Nothing is left if writing fails (a full disk, say), and
    the error names `path` (the bare ENOSPC of a write names no file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, default_mode(0o666))
    except BaseException as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.filename is None:
            raise OSError(exc.errno, f"{exc.strerror or exc} writing", str(path)) from exc
        raise
    return Path(tmp)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary file in the same folder, then rename: readers never see half a file."""
    tmp = write_temp_file(path, data)
    try:
        os.replace(tmp, path)
    except BaseException:
        if tmp.exists():
            tmp.unlink()
        raise


def atomic_write_files(folder: Path, files: dict[str, bytes]) -> None:
    """Write every file of `files` (name -> bytes) into `folder`, or none: all are written to temporary
    siblings first and renamed into place only when every one of them was written."""
    temps: list[tuple[Path, Path]] = []
    try:
        for name, data in files.items():
            temps.append((write_temp_file(folder / name, data), folder / name))
    except BaseException:
        for tmp, _ in temps:
            tmp.unlink(missing_ok=True)
        raise
    for tmp, path in temps:
        os.replace(tmp, path)


# Fixed encoder settings: the bytes (hence the media file names and a pool set's content hash) are a
# function of the pixels and of the Pillow build alone, not of the CPU, the thread count or whatever
# metadata the source image carried. JPEG: libjpeg-turbo's accurate integer DCT (its SIMD paths give the
# same bytes as its C code), 4:2:0 chroma, baseline, no Huffman optimisation. PNG: zlib level 6, no
# filter search, and no text, ICC, gamma or resolution chunks.
JPEG_SETTINGS = {"quality": 90, "subsampling": 2, "optimize": False, "progressive": False}
PNG_SETTINGS = {"compress_level": 6, "optimize": False}


def encode_image(image: PILImage.Image, format: str = "PNG") -> tuple[bytes, str]:
    """RGB pixels encoded with the fixed settings above, without metadata: (bytes, file suffix)."""
    rgb = image.convert("RGB")
    from PIL import Image as PILImage

    bare = PILImage.frombytes("RGB", rgb.size, rgb.tobytes())  # drops info (ICC profile, EXIF, dpi, text)
    buf = io.BytesIO()
    if format == "JPEG":
        bare.save(buf, format="JPEG", **JPEG_SETTINGS)
        return buf.getvalue(), ".jpg"
    if format != "PNG":
        raise ValueError(f"unsupported media format {format!r} (PNG or JPEG)")
    bare.save(buf, format="PNG", **PNG_SETTINGS)
    return buf.getvalue(), ".png"


@dataclass
class MediaStore:
    """The `media/` folder of a pool set."""

    root: Path
    boundary: Path | None = None  # links may point anywhere inside this folder (the pool set); default: root

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
        data, suffix = encode_image(image, format)
        ref = self.put_bytes(data, suffix)
        return Image(ref=ref, width=image.width, height=image.height)

    def path(self, ref: str) -> Path:
        """Where `ref` lives; a reference that escapes the media folder, lexically or through a link
        pointing outside `boundary` (the pool set), is refused."""
        if ref.startswith("/") or ".." in Path(ref).parts:
            raise MediaError(f"media reference {ref!r} escapes the media folder")
        path = self.root / ref
        if path.is_symlink() or _has_linked_parent(self.root, ref):
            inside = Path(os.path.realpath(self.boundary if self.boundary is not None else self.root))
            target = Path(os.path.realpath(path))
            if target != inside and inside not in target.parents:
                raise MediaError(f"media file {path} is a link to {target}, outside the pool set {inside}; refused")
        return path

    def read_bytes(self, ref: str, item: str = "?") -> bytes:
        """The file's bytes, verified: a content-addressed file must hash to its own name."""
        path = self.path(ref)
        if not path.is_file():
            raise MediaError(f"missing media file {path} (referenced by {item})")
        data = path.read_bytes()
        problem = digest_problem(ref, data)
        if problem:
            raise MediaError(f"corrupt media file {path} (referenced by {item}): {problem}")
        return data

    def verify(self, ref: str, item: str = "?") -> None:
        """Raise MediaError unless `ref` is a regular file inside the pool set whose bytes match its name."""
        self.read_bytes(ref, item)

    def load_image(self, ref: str, item: str = "?") -> PILImage.Image:
        from PIL import Image as PILImage, UnidentifiedImageError

        data = self.read_bytes(ref, item)
        path = self.path(ref)
        try:
            with PILImage.open(io.BytesIO(data)) as img:
                img.load()
                return img.convert("RGB")
        except (UnidentifiedImageError, OSError, SyntaxError) as exc:
            raise MediaError(f"corrupt media file {path} (referenced by {item}): {exc}") from exc


_CONTENT_ADDRESSED = re.compile(r"([0-9a-f]{2})/([0-9a-f]{64})(\.[A-Za-z0-9]+)?")


def digest_problem(ref: str, data: bytes) -> str | None:
    """Why `data` is not the file `ref` names (its SHA-256 is in its name), or None when it is.

    References that are not content-addressed (`ab/<sha256>.ext`) carry no digest to check.
    """
    m = _CONTENT_ADDRESSED.fullmatch(ref)
    if m is None:
        return None
    if m.group(1) != m.group(2)[:2]:
        return "filed under the wrong folder for its name"
    actual = hashlib.sha256(data).hexdigest()
    if actual != m.group(2):
        return (f"its bytes do not match its content address (SHA-256 {actual[:12]}, name {m.group(2)[:12]}): "
                "it was replaced or damaged after the build; rebuild the pool set")
    return None


def _has_linked_parent(root: Path, ref: str) -> bool:
    """True when the media folder or a folder on the way to `ref` is a symbolic link."""
    folder = root
    if folder.is_symlink():
        return True
    for part in Path(ref).parts[:-1]:
        folder = folder / part
        if folder.is_symlink():
            return True
    return False
