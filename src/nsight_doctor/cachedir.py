"""The cache folder, and what every cache in it shares: the digest of nsight-doctor's own code
(a cache entry made by other code is never used) and atomic writes (a reader never sees half
a file). Light on purpose: `rules list` and cached runs import it before anything heavy.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import IO, Any

CODE_SUFFIXES = (".py", ".sql", ".yaml", ".yml", ".json", ".csv")


def cache_dir() -> Path:
    """$NSIGHT_DOCTOR_CACHE, else $XDG_CACHE_HOME/nsight-doctor, else ~/.cache/nsight-doctor."""
    env = os.environ.get("NSIGHT_DOCTOR_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "nsight-doctor"


@lru_cache(maxsize=1)
def code_digest() -> str:
    """sha256 over nsight-doctor's code and data files (views, column maps, taxonomy)."""
    h = hashlib.sha256()
    root = resources.files("nsight_doctor")

    def visit(node: Any, rel: str) -> None:
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            if child.name == "__pycache__":
                continue
            if child.is_dir():
                visit(child, f"{rel}{child.name}/")
            elif child.name.endswith(CODE_SUFFIXES):
                h.update(f"{rel}{child.name}\0".encode())
                h.update(child.read_bytes())

    visit(root, "")
    return h.hexdigest()


def write_atomic(path: Path, text: str) -> None:
    """Writes text to path through a temporary file renamed into place. Ctrl-C is held back
    meanwhile (it arrives right after), so that an interrupt can neither leave the
    temporary file nor lose track of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with sigint_deferred():
        tmp = private_file(".partial-", path.parent)
        try:
            with create(tmp, "x") as f:
                f.write(text)
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise


def private_dir(prefix: str, parent: Path | None = None) -> Path:
    """A new folder's path (in the temporary folder, or parent), not yet made: its owner holds
    the path before the folder exists, so a Ctrl-C between the two cannot leave it behind, as
    it can between mkdtemp's making the folder and returning its name. Make it with
    mkdir(mode=0o700) inside the try whose cleanup removes it."""
    return (parent or temp_root()) / f"{prefix}{os.getpid()}-{secrets.token_hex(6)}"


@contextmanager
def scratch_dir(prefix: str, parent: Path | None = None) -> Iterator[Path]:
    """A private folder (private_dir) for the block, removed with all it holds however the
    block ends: tempfile.TemporaryDirectory without its moment between making the folder and
    knowing its name."""
    path = private_dir(prefix, parent)
    try:
        path.mkdir(mode=0o700)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def temp_root() -> Path:
    """The temporary folder ($TMPDIR, ...). The first time, Python chooses it by writing a
    probe file there and removing it; Ctrl-C between the two left the probe (a run of the
    Ctrl-C tests saw one), so Ctrl-C is held back meanwhile."""
    with sigint_deferred():
        return Path(tempfile.gettempdir())


def private_file(prefix: str, parent: Path) -> Path:
    """A new file's path in parent, not yet made (as private_dir's, and for the same reason
    mkstemp is not used): create it with create() inside the try whose cleanup removes it."""
    return private_dir(prefix, parent)


def create(path: Path, mode: str = "xb") -> IO[Any]:
    """Opens a new file (mode "x" or "xb": it must not exist) readable by its owner only, as
    mkstemp's files are."""
    return open(path, mode, opener=lambda p, flags: os.open(p, flags, 0o600))


@contextmanager
def sigint_deferred() -> Iterator[None]:
    """Ctrl-C held back for the block, then delivered. (A handler rather than a signal mask:
    DuckDB's threads would otherwise take the signal, and Python raises it in the main thread
    at once.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if held:
            if callable(previous):
                previous(signal.SIGINT, None)  # Python's default handler raises KeyboardInterrupt
            elif previous == signal.SIG_DFL:
                os.kill(os.getpid(), signal.SIGINT)
