"""The command line: a thin click layer over nsight_doctor.analyze().

Exit codes: 0 no finding at or above --fail-on, 1 findings at or above it, 2 the tool could
not do its job (one line on stderr, never a traceback), 130 interrupted (Ctrl-C).

One module per command (``analyze``, ``compare``, ``rules``; the archive's commands are in
archive/commands.py), and what they share in ``common``. Nothing imports the command line.
"""

from __future__ import annotations

import click

from nsight_doctor import __version__
from nsight_doctor.cli.analyze import analyze
from nsight_doctor.cli.common import DoctorGroup
from nsight_doctor.cli.compare import compare
from nsight_doctor.cli.rules import rules


@click.group(cls=DoctorGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="nsight-doctor")
def main():
    """Diagnose Nsight Systems, Nsight Compute and nvprof profiles of GPU and LLM-serving
    workloads, offline.

    \b
    Example:
      nsight-doctor analyze run.nsys-rep
    """


for command in (analyze, compare, rules):
    main.add_command(command)


def _register_archive() -> None:
    from nsight_doctor.archive.commands import register

    register(main)


_register_archive()

if __name__ == "__main__":
    main()
