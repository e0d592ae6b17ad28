"""Errors that the command line reports as one line on stderr with exit code 2, and the tests
that tell an interrupt or an exhausted memory limit from other failures, wherever they were
wrapped."""

from __future__ import annotations

from collections.abc import Iterator


class DoctorError(Exception):
    """The tool could not do its job; str(self) is the whole message for the user."""


class InputError(DoctorError):
    """An input path is missing, unreadable, of an unknown kind, truncated or corrupt."""


class ToolMissingError(DoctorError):
    """An external tool (nsys) that the input needs was not found."""


class ReportVersionError(DoctorError):
    """The report was written by a tool version that the available tools cannot read."""


class RuleError(DoctorError):
    """A rule file is invalid, or a rule failed to evaluate."""


class ResourceError(DoctorError):
    """The work did not fit in the memory limit, or an external tool ran out of time."""


def causes(e: BaseException) -> Iterator[BaseException]:
    """e and every exception it was raised from or while handling (also through
    ``raise ... from None``, which hides the context but keeps it)."""
    seen: set[int] = set()
    stack: list[BaseException] = [e]
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        yield x
        stack.extend(c for c in (x.__cause__, x.__context__) if c is not None)


def is_interrupt(e: BaseException) -> bool:
    """Ctrl-C, however it surfaced: KeyboardInterrupt in Python code, RuntimeError('Query
    interrupted') from a DuckDB query that the signal stopped, or DuckDB's InterruptException."""
    for x in causes(e):
        if isinstance(x, KeyboardInterrupt) or type(x).__name__ == "InterruptException":
            return True
        if isinstance(x, RuntimeError) and str(x).strip() == "Query interrupted":
            return True
    return False


def is_out_of_memory(e: BaseException) -> bool:
    """DuckDB's OutOfMemoryException (its memory limit was hit) or Python's MemoryError."""
    for x in causes(e):
        if isinstance(x, MemoryError) or type(x).__name__ == "OutOfMemoryException":
            return True
        if "Out of Memory Error" in str(x):
            return True
    return False
