"""The command line: a thin click layer over nsight_doctor.analyze().

Exit codes: 0 no finding at or above --fail-on, 1 findings at or above it, 2 the tool could
not do its job (one line on stderr, never a traceback), 130 interrupted (Ctrl-C), 143 terminated (SIGTERM).

One module per command (``analyze``, ``compare``, ``rules``; the archive's commands are in
archive/commands.py), and what they share in ``common``. Nothing imports the command line.
"""

from __future__ import annotations

import importlib

import click

from nsight_doctor import __version__
from nsight_doctor.cli.common import DoctorGroup

# Each command, by the module that defines it: a command's module is imported when the command
# runs or help lists it, so that analyze does not load compare's and the archive's (10 ms of a
# one-second run on 2 cores).
COMMANDS = {
    "analyze": "nsight_doctor.cli.analyze",
    "compare": "nsight_doctor.cli.compare",
    "rules": "nsight_doctor.cli.rules",
    "ingest": "nsight_doctor.archive.commands",
    "query": "nsight_doctor.archive.commands",
    "report": "nsight_doctor.archive.commands",
    "export": "nsight_doctor.archive.commands",
}


class Commands(DoctorGroup):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMANDS.get(cmd_name)
        return getattr(importlib.import_module(module), cmd_name) if module else None


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="nsight-doctor")
def main():
    """Diagnose Nsight Systems, Nsight Compute and nvprof profiles of GPU and LLM-serving
    workloads, offline.

    \b
    Example:
      nsight-doctor analyze run.nsys-rep
    """


if __name__ == "__main__":
    main()
