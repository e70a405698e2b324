"""Hash files of public datasets (the known-dataset guard) and the `hash` command's engine.

A hash file is Parquet with the columns `path`, `sha256`, `phash`, `phash_mirror` (16-char
lowercase hex) and `method`. The pipeline loads only files whose every row was made by its
own `HASH_METHOD`: hashes from another decode path differ by a few bits and would match at
the wrong distances, so such a file is refused, not half-used.
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import warnings
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from PIL import Image, UnidentifiedImageError

from lookbench_live.config import DedupSettings
from lookbench_live.dedup.index import is_hash
from lookbench_live.schema.hashing import HASH_METHOD, hash_bytes
from lookbench_live.schema.imagedata import decoder_ran_out
from lookbench_live.warehouse.lake import atomic_write_bytes, parquet_bytes

IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".webp", ".gif", ".bmp", ".tif", ".tiff"})
_SUFFIX_LIST = " ".join(sorted(IMAGE_SUFFIXES))
HASH_FILE_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("sha256", pa.string()),
        ("phash", pa.string()),
        ("phash_mirror", pa.string()),
        ("method", pa.string()),
    ]
)


class KnownDatasetError(ValueError):
    """A hash file cannot be used; the message names the file and what to do."""


@dataclass(slots=True)
class HashedFiles:
    """Outcome of hashing files: the hash table and the files that could not be decoded."""

    table: pa.Table
    failures: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)


@dataclass(slots=True)
class KnownHashes:
    """Every loaded known-dataset image, in parallel lists."""

    sha256: list[str] = field(default_factory=list)
    phash: list[str] = field(default_factory=list)
    phash_mirror: list[str] = field(default_factory=list)
    ref: list[str] = field(default_factory=list)  # "<hash file>#<path in the dataset>"

    def __len__(self) -> int:
        return len(self.sha256)


# ---------------------------------------------------------------------- making hash files
def scan_image_files(paths: Iterable[str | os.PathLike[str]]) -> tuple[list[Path], list[tuple[str, str]]]:
    """Image files named directly or found recursively (sorted) under named folders, and every
    other file found in those folders with the reason it is not hashed."""
    files: list[Path] = []
    skipped: list[tuple[str, str]] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for found in sorted(path.rglob("*")):
                if not found.is_file():
                    continue
                if found.suffix.lower() in IMAGE_SUFFIXES:
                    files.append(found)
                else:
                    kind = f"extension {found.suffix!r}" if found.suffix else "no extension"
                    skipped.append((str(found), f"not an image file name ({kind}; hashed: {_SUFFIX_LIST})"))
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"{path} is neither an image file nor a folder")
    return files, skipped


def iter_image_files(paths: Iterable[str | os.PathLike[str]]) -> Iterator[Path]:
    """Image files named directly, or found recursively (sorted) under named folders."""
    yield from scan_image_files(paths)[0]


def _plain_reason(exc: BaseException, settings: DedupSettings, data: bytes = b"") -> str:
    """A reason a person can act on, never Pillow's object reprs (`<_io.BytesIO object at 0x…>`)."""
    if isinstance(exc, UnidentifiedImageError):
        return f"not a readable image (formats hashed: {', '.join(settings.known_dataset_formats)})"
    if isinstance(exc, (Image.DecompressionBombError, Image.DecompressionBombWarning)):
        return f"too many pixels (over the cap of {settings.known_dataset_max_pixels:,})"
    if isinstance(exc, OSError) and data and decoder_ran_out(data, tuple(settings.known_dataset_formats)):
        return "truncated image file"
    text = str(exc)
    if isinstance(exc, OSError) and exc.strerror:
        return f"cannot read the file ({exc.strerror})"
    if isinstance(exc, MemoryError):
        return "out of memory while decoding"
    if text and "object at 0x" not in text:
        return f"cannot decode the image ({text[:200]})"
    return f"cannot decode the image ({type(exc).__name__})"


def _hash_one(
    path: str, settings: DedupSettings
) -> tuple[str, str | None, str | None, str | None, str | None]:
    """(path, sha256, phash, phash_mirror, error) for one file; never raises."""
    data = b""
    try:
        data = Path(path).read_bytes()
        if not data:
            return path, None, None, None, "empty file"
        with warnings.catch_warnings():
            # Pillow only warns between 1x and 2x MAX_IMAGE_PIXELS: an error here (I2).
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=settings.known_dataset_formats) as header:
                width, height = header.size
            if width * height > settings.known_dataset_max_pixels:
                return (
                    path,
                    None,
                    None,
                    None,
                    f"{width}x{height} is over the cap of {settings.known_dataset_max_pixels:,} pixels",
                )
            hashes = hash_bytes(data)
    except (
        OSError, ValueError, SyntaxError, EOFError, MemoryError, Image.DecompressionBombError,
        Image.DecompressionBombWarning,
    ) as exc:  # fmt: skip
        return path, None, None, None, _plain_reason(exc, settings, data)
    return path, hashlib.sha256(data).hexdigest(), hashes.phash, hashes.phash_mirror, None


def hash_files(
    paths: Sequence[str | os.PathLike[str]], *, workers: int = 1, settings: DedupSettings | None = None
) -> HashedFiles:
    """Hash every image file under `paths` with the pipeline's method, decoding only the formats
    and pixel counts `settings` allows (`dedup.known_dataset_formats`, `known_dataset_max_pixels`;
    None: the defaults); every file not hashed is listed in `failures` with a plain reason (other
    extensions and undecodable files alike)."""
    settings = settings or DedupSettings()
    found, failures = scan_image_files(paths)
    files = [str(p) for p in found]
    hash_one = functools.partial(_hash_one, settings=settings)
    if workers > 1 and len(files) > 64:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            results = list(pool.map(hash_one, files, chunksize=64))
    else:
        results = [hash_one(f) for f in files]
    rows = {name: [] for name in HASH_FILE_SCHEMA.names}  # type: dict[str, list[str]]
    for path, sha, phash, mirror, error in results:
        if error is not None or sha is None or phash is None or mirror is None:
            failures.append((path, error or "no hash"))
            continue
        rows["path"].append(path)
        rows["sha256"].append(sha)
        rows["phash"].append(phash)
        rows["phash_mirror"].append(mirror)
        rows["method"].append(HASH_METHOD)
    return HashedFiles(pa.table(rows, schema=HASH_FILE_SCHEMA), failures)


def write_hash_file(table: pa.Table, out: str | os.PathLike[str]) -> None:
    """Write a hash file so that readers see nothing or all of it."""
    fs, path = fsspec.core.url_to_fs(str(out))
    atomic_write_bytes(fs, path, parquet_bytes(table.cast(HASH_FILE_SCHEMA)))


# ---------------------------------------------------------------------- loading them
def load_known_hashes(files: Sequence[str]) -> KnownHashes:
    """Load hash files for the guard; raises `KnownDatasetError` on any unusable file."""
    known = KnownHashes()
    for name in files:
        try:
            fs, path = fsspec.core.url_to_fs(name)
            with fs.open(path, "rb") as handle:
                table = pq.read_table(handle)
        except FileNotFoundError as exc:
            raise KnownDatasetError(f"known-dataset hash file {name} does not exist") from exc
        except (OSError, pa.ArrowInvalid) as exc:
            raise KnownDatasetError(f"known-dataset hash file {name} is not readable Parquet: {exc}") from exc
        missing = [c for c in HASH_FILE_SCHEMA.names if c not in table.column_names]
        if missing:
            raise KnownDatasetError(
                f"known-dataset hash file {name} lacks the columns {missing}; make it with `lookbench-live hash`"
            )
        methods = set(pc.unique(table.column("method")).to_pylist())
        if methods - {HASH_METHOD}:
            other = sorted(str(m) for m in methods - {HASH_METHOD})
            raise KnownDatasetError(
                f"known-dataset hash file {name} was made with hash method {other}, but this pipeline hashes "
                f"with {HASH_METHOD!r}; hashes of different methods are never compared. Re-run "
                f"`lookbench-live hash` on the dataset with this version"
            )
        columns = {c: table.column(c).to_pylist() for c in ("path", "sha256", "phash", "phash_mirror")}
        for row, (path_in, sha, phash, mirror) in enumerate(zip(*columns.values(), strict=True)):
            if not (is_hash(phash) and is_hash(mirror)):
                raise KnownDatasetError(
                    f"known-dataset hash file {name}, row {row} ({path_in}): phash {phash!r} / phash_mirror "
                    f"{mirror!r} are not 16 hex digits"
                )
            known.sha256.append(sha or "")
            known.phash.append(phash.lower())
            known.phash_mirror.append(mirror.lower())
            known.ref.append(f"{name}#{path_in}")
    return known
