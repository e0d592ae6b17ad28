"""The cache folder, and what every cache in it shares: the digest of nsight-doctor's own code
(a cache entry made by other code is never used) and atomic writes (a reader never sees half
a file). Light on purpose: `rules list` and cached runs import it before anything heavy.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

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
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".partial-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
