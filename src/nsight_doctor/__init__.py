"""nsight-doctor: offline diagnosis of NVIDIA GPU profiles.

The library API is one call; the command line is a thin layer over it:

    >>> from nsight_doctor import analyze
    >>> diagnosis = analyze(["run.nsys-rep"])
    >>> diagnosis.findings[0].title
"""

from __future__ import annotations

# (not typing's: importing typing took 13 of the 20 ms before the command's Ctrl-C handler
# is in place, in which Ctrl-C is Python's own, with a traceback; type checkers know the name)
TYPE_CHECKING = False

__version__ = "0.1.0"

__all__ = ["AnalyzeOptions", "__version__", "analyze"]

if TYPE_CHECKING:
    from typing import Any

    from nsight_doctor.engine import AnalyzeOptions, analyze


def __getattr__(name: str) -> Any:
    # Imported on first use: importing the package stays fast (the command line starts with
    # it, and must answer Ctrl-C at once), and the pipeline loads only when it is needed.
    if name in ("AnalyzeOptions", "analyze"):
        from nsight_doctor import engine

        return getattr(engine, name)
    raise AttributeError(f"module 'nsight_doctor' has no attribute {name!r}")
