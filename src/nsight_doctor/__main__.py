"""``python -m nsight_doctor`` and the ``nsight-doctor`` command.

The command line's modules (DuckDB, click, the rules) are imported inside run(), so that
Ctrl-C while they load also ends in "nsight-doctor: interrupted" and exit code 130.
"""

from __future__ import annotations

import gc

from nsight_doctor.errors import exit_interrupted, install_interrupt_handler, stop_handling_signals


def interrupted_import(e: BaseException) -> bool:
    """Whether an exception raised while importing came from Ctrl-C (Python wraps some, e.g.
    an interrupt inside a class's __set_name__ becomes a RuntimeError)."""
    seen = set()
    x: BaseException | None = e
    while x is not None and id(x) not in seen:
        if isinstance(x, KeyboardInterrupt):
            return True
        seen.add(id(x))
        x = x.__cause__ or x.__context__
    return False


def run() -> None:
    install_interrupt_handler()
    from nsight_doctor.runtime import configure_allocator, configure_polars

    configure_allocator()  # before DuckDB is imported
    configure_polars()  # and Polars
    # The modules' objects live as long as the process: the collector need not look at them
    # while they load, nor at every later collection (25 ms of a one-second run on 2 cores).
    gc.disable()
    try:
        from nsight_doctor.cli import main
    except BaseException as e:
        if interrupted_import(e):
            exit_interrupted()
        raise
    finally:
        gc.freeze()
        gc.enable()
    try:
        main()
    finally:
        # Done: a Ctrl-C put off by the handler and sent again now would land in the
        # interpreter's shutdown, which prints it with a traceback.
        stop_handling_signals()


if __name__ == "__main__":
    run()
