"""What every command shares: exit codes, errors as one line on stderr, the group class that
turns every failure into them, the options that several commands take, and the progress line."""

from __future__ import annotations

import functools
import os
import re
import sys
import traceback

import click

from nsight_doctor.errors import DoctorError, exit_interrupted, is_interrupt, is_out_of_memory, stop_handling_signals
from nsight_doctor.render.text import sanitize

EXIT_FINDINGS = 1
EXIT_ERROR = 2


def error(message: str) -> None:
    click.echo(f"nsight-doctor: error: {one_line(message)}", err=True)
    sys.exit(EXIT_ERROR)


def interrupted() -> None:
    # Cleanup (partial stores, exports, decompressed copies) ran on the way out.
    exit_interrupted()


class DoctorGroup(click.Group):
    """Turns every error into one line on stderr and exit code 2, and Ctrl-C into exit 130."""

    def main(self, *args, **kwargs):
        kwargs["standalone_mode"] = False
        try:
            rv = super().main(*args, **kwargs)
        except click.exceptions.Exit as e:
            sys.exit(e.exit_code)
        except click.exceptions.NoArgsIsHelpError as e:
            # A command group run without a command: its help, as with --help.
            click.echo(e.ctx.get_help() if e.ctx else self.get_help(click.Context(self)))
            sys.exit(0)
        except click.Abort:
            # click turns KeyboardInterrupt (and EOF at a prompt, which we never show) into Abort.
            interrupted()
        except click.ClickException as e:
            ctx = getattr(e, "ctx", None)
            hint = f" (see: {ctx.command_path} --help)" if ctx else ""
            error(e.format_message() + hint)
        except KeyboardInterrupt:
            interrupted()
        except DoctorError as e:
            if is_interrupt(e):
                interrupted()
            error(str(e))
        except Exception as e:
            if is_interrupt(e):
                interrupted()
            if os.environ.get("NSIGHT_DOCTOR_DEBUG"):
                traceback.print_exc()
            if is_out_of_memory(e):
                first = next((ln for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
                error(f"ran out of memory ({first}); give DuckDB more with --memory-limit, e.g. --memory-limit 4GB")
            click.echo(
                f"nsight-doctor: internal error: {type(e).__name__}: {one_line(str(e))} "
                "(set NSIGHT_DOCTOR_DEBUG=1 for a traceback, and please report it)",
                err=True,
            )
            sys.exit(EXIT_ERROR)
        # The job is done and its files are whole: a Ctrl-C now would only end the interpreter's
        # shutdown by the signal (exit -2, not 0), so it is ignored from here on.
        stop_handling_signals()
        sys.exit(rv or 0)


def one_line(s: str) -> str:
    """One line of plain text: whitespace runs collapsed, escape sequences and other control
    characters from file names or file content removed."""
    return sanitize(" ".join(s.split()))


MEMORY_RE = re.compile(r"^\s*\d+(\.\d+)?\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)\s*$", re.I)


def memory_size(ctx, param, value: str | None) -> str | None:
    if value is not None and not MEMORY_RE.match(value):
        raise click.BadParameter(f"'{value}' is not a size such as 512MB, 4GB or 1.5GiB")
    return value.replace(" ", "") if value else value


def rules_option(f):
    return click.option(
        "--rules", "rules_dirs", multiple=True, metavar="DIR", help="Also load the rules in DIR (repeatable)."
    )(f)


def nsys_option(f):
    return click.option(
        "--nsys",
        "nsys_path",
        metavar="PATH",
        default=None,
        help="The nsys binary used to export .nsys-rep reports (default: $NSYS, PATH, /opt/nvidia).",
    )(f)


FORMAT_HELP = {
    "text": "text",
    "markdown": "markdown",
    "json": "json (docs/json.md)",
    "html": "html (one offline file with charts)",
    "ipynb": "ipynb (a notebook that reopens the store; keeps it beside the notebook unless --db says where)",
    "pdf": "pdf (printed with a Chromium-based browser)",
}


def report_options(command=None, *, formats=None, output_help=None):
    """--format, -o/--output and --charts: how a command writes its report, shared by every command
    that reports. The command gets them as one ``report`` argument (nsight_doctor.reports.ReportRequest).
    ``formats`` limits the formats (default: all); ``output_help`` says where -o's default goes."""
    if command is None:
        return functools.partial(report_options, formats=formats, output_help=output_help)
    from nsight_doctor.render import ALL_FORMATS

    formats = list(formats or ALL_FORMATS)

    @functools.wraps(command)
    def f(*args, fmt, output, charts_dir, **kwargs):
        from nsight_doctor.reports import ReportRequest

        return command(*args, report=ReportRequest(fmt=fmt, output=output, charts_dir=charts_dir), **kwargs)

    f = click.option(
        "--charts",
        "charts_dir",
        type=click.Path(file_okay=False),
        default=None,
        metavar="DIR",
        help="Also write each chart as PNG and SVG into DIR, with any format.",
    )(f)
    f = click.option(
        "-o",
        "--output",
        type=click.Path(dir_okay=False),
        default=None,
        metavar="FILE",
        help="Write the report to FILE. Default: "
        + (
            output_help
            or "standard output for text, markdown and json; PROFILE's name with .html, .ipynb or .pdf in the "
            "current folder for those."
        ),
    )(f)
    names = [FORMAT_HELP[x] for x in formats]
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(formats),
        default="text",
        show_default=True,
        help="Report format: " + ", ".join(names[:-1]) + " or " + names[-1] + ". docs/reports.md.",
    )(f)


def split_list(values: tuple[str, ...]) -> list[str]:
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


class Progress:
    """One self-overwriting status line on stderr, shown only on a terminal. A step given
    again with a new parenthesised detail ("nsys export (12 s)") updates its line."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.steps = 0
        self.last = ""

    def __call__(self, step: str) -> None:
        if self.enabled:
            base = step.split(" (", 1)[0]
            if base != self.last:
                self.steps += 1
                self.last = base
            sys.stderr.write(f"\r\x1b[2K[nsight-doctor] {self.steps:3d} {sanitize(step)}")
            sys.stderr.flush()

    def done(self) -> None:
        if self.enabled and self.steps:
            sys.stderr.write("\r\x1b[2K")
            sys.stderr.flush()
