"""nsight-doctor: offline diagnosis of NVIDIA GPU profiles.

The library API is one call; the command line is a thin layer over it:

    >>> from nsight_doctor import analyze
    >>> diagnosis = analyze(["run.nsys-rep"])
    >>> diagnosis.findings[0].title
"""

__version__ = "0.1.0"

from nsight_doctor.engine import AnalyzeOptions, analyze

__all__ = ["AnalyzeOptions", "__version__", "analyze"]
