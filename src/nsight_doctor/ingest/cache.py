"""The cache folder: exports of reports that could not be written beside them."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """$NSIGHT_DOCTOR_CACHE, else $XDG_CACHE_HOME/nsight-doctor, else ~/.cache/nsight-doctor."""
    env = os.environ.get("NSIGHT_DOCTOR_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "nsight-doctor"


def exports_dir() -> Path:
    d = cache_dir() / "exports"
    d.mkdir(parents=True, exist_ok=True)
    return d


def unpacked_dir() -> Path:
    d = cache_dir() / "unpacked"
    d.mkdir(parents=True, exist_ok=True)
    return d
