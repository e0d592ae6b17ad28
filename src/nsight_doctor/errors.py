"""Errors that the command line reports as one line on stderr with exit code 2, the tests
that tell an interrupt or an exhausted memory limit from other failures, wherever they were
wrapped, Ctrl-C's handler and the exit on an interrupt. Light on purpose: ``__main__``
imports it before anything heavy."""

from __future__ import annotations

import os
import signal
import sys

TYPE_CHECKING = False  # (as in the package's __init__: typing is slow to import)
if TYPE_CHECKING:
    from collections.abc import Iterator
    from types import FrameType


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


class OutputError(DoctorError):
    """A report or chart cannot be written where the options say."""


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


# How often Ctrl-C may be put off (every 20 ms) before it is raised wherever it lands.
MAX_DEFERRALS = 500

# The signal that stopped the run: SIGINT (Ctrl-C), or SIGTERM (`kill`, `timeout`, a job
# scheduler or CI cancelling the job), which takes Ctrl-C's path so that the same cleanup runs.
stopped_by = [signal.SIGINT]


def install_interrupt_handler() -> None:
    """Ctrl-C raises KeyboardInterrupt, as Python's own handler does, except where that
    exception would not reach the command (put_off): there it is sent again 20 ms later.
    SIGTERM becomes a Ctrl-C: without this, Python dies at once and leaves its temporary
    store (hundreds of MB for a large profile) behind."""
    deferred = 0

    def on_terminate(signum: int, frame: FrameType | None) -> None:
        if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
            # The job is done (stop_handling_signals is under way): end at once, as it would.
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        stopped_by[0] = signal.SIGTERM
        os.kill(os.getpid(), signal.SIGINT)

    def on_interrupt(signum: int, frame: FrameType | None) -> None:
        nonlocal deferred
        if deferred < MAX_DEFERRALS and put_off(frame):
            deferred += 1
            import threading

            timer = threading.Timer(0.02, os.kill, (os.getpid(), signal.SIGINT))
            timer.daemon = True
            timer.start()
            return
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_interrupt)
    signal.signal(signal.SIGTERM, on_terminate)


def stop_handling_signals() -> None:
    """Once the job is done and its files are whole: Ctrl-C is ignored (landing in the
    interpreter's shutdown, it would print a traceback), and SIGTERM ends the process at once."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def put_off(frame: FrameType | None) -> bool:
    """Whether an exception raised in the frame an interrupt landed in would be lost or turned
    into something else: Polars' Python code, which its Rust calls back (a frame's dtype
    objects, a DuckDB result's Arrow stream), where it becomes a Rust panic printed with a
    backtrace; and the code that Python runs as a callback of its own and whose exceptions it
    prints and ignores: a finalizer (__del__), or importlib's own (a weak reference's callback
    that drops a module lock: a run of test_ctrl_c_at_any_stage once printed one)."""
    if frame is None:
        return False
    code = frame.f_code
    return in_polars(frame) or code.co_name == "__del__" or code.co_filename.startswith("<frozen importlib")


def in_polars(frame: FrameType | None) -> bool:
    """Whether the frame the interrupt landed in runs a module of the polars package."""
    polars = sys.modules.get("polars")
    init = getattr(polars, "__file__", None)
    if frame is None or not init:
        return False
    return frame.f_code.co_filename.startswith(os.path.dirname(init) + os.sep)


def exit_interrupted() -> None:
    """Says so and exits with 130 (128 + SIGINT, as shells report an interrupted command), or
    143 after a SIGTERM.

    The exit skips the interpreter's own shutdown: when Ctrl-C lands while a C extension
    runs Python code (DuckDB's import does), CPython remembers the interrupt as unhandled
    and, however the program then exits, kills itself with SIGINT. Cleanup of partial
    files has already run where the interrupt was raised; what registered for exit runs
    here."""
    terminated = stopped_by[0] == signal.SIGTERM
    sys.stderr.write("nsight-doctor: terminated\n" if terminated else "nsight-doctor: interrupted\n")
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    import atexit

    atexit._run_exitfuncs()
    os._exit(128 + stopped_by[0])
