"""The cache folder: exports of reports that could not be written beside them, and
decompressed copies of .xz/.gz inputs.

When the cache folder cannot be created or written (a read-only home, a full disk, a path
that is a file), a private temporary folder is used for this run instead, removed when the
process exits, and the diagnosis says so (take_fallback_note).
"""

from __future__ import annotations

import atexit
import gzip
import hashlib
import lzma
import os
import shutil
import zlib
from pathlib import Path

from nsight_doctor.cachedir import cache_dir, create, private_dir, private_file
from nsight_doctor.errors import InputError

_fallback: dict[str, str] = {}  # "folder": the temporary folder, "reason": why, "used": since the last note


def writable(d: Path) -> str | None:
    """None when files can be created in d (made if missing), else the reason."""
    try:
        d.mkdir(parents=True, exist_ok=True)
        probe = private_file(".probe-", d)
        try:
            create(probe).close()
        finally:
            probe.unlink(missing_ok=True)
    except OSError as e:
        return e.strerror or str(e)
    return None


def usable_dir(name: str) -> Path:
    """cache_dir()/name, or the same folder inside this run's temporary fallback."""
    preferred = cache_dir() / name
    reason = writable(preferred)
    if reason is None:
        return preferred
    if "folder" not in _fallback:
        folder = private_dir("nsight-doctor-cache-")
        atexit.register(shutil.rmtree, folder, True)  # (before it exists: see private_dir)
        folder.mkdir(mode=0o700)
        _fallback.update(folder=str(folder), reason=f"the cache folder {cache_dir()} is not writable ({reason})")
    _fallback["used"] = "yes"
    d = Path(_fallback["folder"]) / name
    d.mkdir(parents=True, exist_ok=True)
    return d


def take_fallback_note() -> str | None:
    """What the diagnosis says when the cache folder could not be used since the last call."""
    if not _fallback.pop("used", None):
        return None
    return f"{_fallback['reason']}: used a temporary folder for this run (set NSIGHT_DOCTOR_CACHE to choose another)"


def exports_dir() -> Path:
    return usable_dir("exports")


def unpacked_dir() -> Path:
    return usable_dir("unpacked")


def unpack(src: Path, kind: str, original: Path) -> Path:
    """Decompresses src (kind "xz" or "gzip") into the cache folder, never beside the input,
    and returns the copy, which is reused while src is unchanged. Errors name original, the
    user's file. A copy is written under a temporary name and renamed when complete, so an
    interrupted or failed run leaves nothing that looks complete."""
    st = src.stat()
    key = hashlib.sha256(f"{src.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:20]
    name = src.name.rsplit(".", 1)[0] or "unpacked"
    dest = unpacked_dir() / key / name
    if dest.exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    opener = lzma.open if kind == "xz" else gzip.open
    tmp = private_file(".partial-", dest.parent)
    try:
        with create(tmp) as out, opener(src, "rb") as inp:
            try:
                shutil.copyfileobj(inp, out, 1 << 20)
            except (EOFError, lzma.LZMAError, zlib.error) as e:
                raise InputError(f"'{original}' could not be decompressed ({e}): truncated or corrupt") from None
            except OSError as e:
                if e.errno is None:  # gzip reports bad data as OSError (BadGzipFile) without errno
                    raise InputError(f"'{original}' could not be decompressed ({e}): truncated or corrupt") from None
                raise InputError(f"'{original}' could not be decompressed into {dest.parent}: {e}") from None
        os.replace(tmp, dest)
    except BaseException:
        # Also on Ctrl-C: no partial copy is left in the cache.
        tmp.unlink(missing_ok=True)
        raise
    return dest
