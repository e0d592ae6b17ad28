"""The command line: a thin click layer over nsight_doctor.analyze().

Exit codes: 0 no finding at or above --fail-on, 1 findings at or above it, 2 the tool could
not do its job (one line on stderr, never a traceback), 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import click

from nsight_doctor import __version__
from nsight_doctor.errors import DoctorError, exit_interrupted, is_interrupt, is_out_of_memory
from nsight_doctor.model import SEVERITIES, severity_rank
from nsight_doctor.render.text import sanitize

if TYPE_CHECKING:
    from nsight_doctor.compare import Profile

EXIT_FINDINGS = 1
EXIT_ERROR = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it


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


@click.group(cls=DoctorGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="nsight-doctor")
def main():
    """Diagnose Nsight Systems, Nsight Compute and nvprof profiles of GPU and LLM-serving
    workloads, offline.

    \b
    Example:
      nsight-doctor analyze run.nsys-rep
    """


@main.command()
@click.argument("inputs", nargs=-1, required=True, metavar="PROFILE...")
@report_options
@rules_option
@click.option(
    "--select", multiple=True, metavar="IDS", help="Run only these rules (ids or tags, comma-separated; repeatable)."
)
@click.option("--ignore", multiple=True, metavar="IDS", help="Skip these rules (ids or tags).")
@click.option(
    "--threshold",
    "thresholds",
    multiple=True,
    metavar="RULE.NAME=VALUE",
    help="Override a rule threshold, e.g. launch-bound.min_launch_idle_pct=20.",
)
@click.option(
    "--fail-on",
    type=click.Choice(SEVERITIES),
    default=None,
    help="Exit with code 1 when a finding has this severity or a higher one.",
)
@click.option(
    "--db",
    type=click.Path(dir_okay=False),
    default=None,
    help="Keep the DuckDB store in this file, for your own SQL. An existing store of the same profile is reused; "
    "a fleet database (ingest) that holds the profile gives its diagnosis.",
)
@nsys_option
@click.option(
    "--gaps",
    "largest_gaps",
    type=click.IntRange(0, 1000),
    default=5,
    show_default=True,
    help="How many of the largest idle gaps to report.",
)
@click.option("--no-cache", is_flag=True, help="Analyse again even when the same content was analysed before.")
@click.option(
    "--memory-limit",
    metavar="SIZE",
    callback=memory_size,
    default=None,
    help="DuckDB's memory limit, e.g. 4GB (default: 0.7 times the input's size and 16MB per "
    "thread, at least 256MB, raised after reading to what the busiest GPU's operations need, and "
    "tried once more with a larger limit if that is not enough); beyond it, work spills to a "
    "temporary folder.",
)
@click.option(
    "--export-timeout",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    default=1800,
    show_default=True,
    help="Stop an nsys export of a report, or the reading of an Nsight Compute report, that takes longer than this.",
)
@click.option("-v", "--verbose", is_flag=True, help="Also list rules that did not apply, and notes.")
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
def analyze(
    inputs,
    report,
    rules_dirs,
    select,
    ignore,
    thresholds,
    fail_on,
    db,
    nsys_path,
    largest_gaps,
    no_cache,
    memory_limit,
    export_timeout,
    verbose,
    quiet,
):
    """Diagnose a profile: a ranked list of findings with evidence and fixes.

    PROFILE is an Nsight Systems report (.nsys-rep, .qdrep), its SQLite export or a Parquet
    export folder (nsys export --type parquetdir), an Nsight Compute report (.ncu-rep) or an
    nvprof database (.nvvp, .prof); compressed copies (.xz, .gz) work too. Give one timeline
    (Nsight Systems or nvprof) and any number of Nsight Compute reports: kernel findings are
    then ranked by the kernels' time in the timeline.

    \b
    Examples:
      nsight-doctor analyze run.nsys-rep
      nsight-doctor analyze run.sqlite --format markdown > ticket.md
      nsight-doctor analyze run.sqlite --format json --fail-on high
      nsight-doctor analyze run.sqlite kernels.ncu-rep
      nsight-doctor analyze run.nsys-rep --format html -o report.html --charts charts/
      nsight-doctor analyze run.nsys-rep --format ipynb -o report.ipynb
    """
    from nsight_doctor.engine import AnalyzeOptions
    from nsight_doctor.engine import analyze as run_analysis
    from nsight_doctor.reports import write

    overrides = {}
    for item in thresholds:
        key, sep, value = item.partition("=")
        if not sep or "." not in key:
            raise click.BadParameter(f"'{item}' is not RULE.NAME=VALUE", param_hint="--threshold")
        overrides[key.strip()] = value.strip()
    one_timeline(inputs)
    report.check()
    progress = Progress(enabled=not quiet and sys.stderr.isatty())
    opts = AnalyzeOptions(
        rules_dirs=rules_dirs,
        select=split_list(select),
        ignore=split_list(ignore),
        thresholds=overrides,
        db=report.store_for(list(inputs), db),
        nsys=nsys_path,
        largest_gaps=largest_gaps,
        command="nsight-doctor " + shlex.join(sys.argv[1:]),
        progress=progress,
        cache=not no_cache and not os.environ.get("NSIGHT_DOCTOR_NO_CACHE"),
        report_data=report.needs_data,
        memory_limit=memory_limit,
        export_timeout=export_timeout,
    )
    try:
        diagnosis = run_analysis(inputs, opts)
    finally:
        progress.done()
    out, said = write(diagnosis, report, list(inputs), color=sys.stdout.isatty(), verbose=verbose)
    if out is not None:
        click.echo(out, nl=False)
    for line in said if not quiet else []:
        click.echo(f"nsight-doctor: {line}", err=True)
    if fail_on and any(severity_rank(f.severity) >= severity_rank(fail_on) for f in diagnosis.findings):
        return EXIT_FINDINGS
    return 0


def metric_names() -> list[str]:
    from nsight_doctor.compare import METRICS

    return list(METRICS)


@main.command()
@click.argument("profiles", nargs=-1, required=True, metavar="PROFILE PROFILE...")
@click.option(
    "--label",
    "labels",
    multiple=True,
    metavar="NAME",
    help="Name each profile in the report, in order (repeat once per profile). Default: the file names.",
)
@report_options(
    formats=["text", "markdown", "json", "html"],
    output_help="standard output for text, markdown and json; FIRST-vs-LAST.html in the current folder for html.",
)
@click.option(
    "--fail-on-regression",
    type=click.FloatRange(min=0),
    default=None,
    metavar="PCT",
    help="Exit with code 1 when the last profile is more than PCT% worse than the first on the gate's metric.",
)
@click.option(
    "--metric",
    type=click.Choice(metric_names()),
    default=None,
    help="The metric of the verdict and the gate (docs/compare.md). Default: time per token with "
    "--tokens-per-step, else the median decode step time where every profile has decode steps, else the "
    "median step time, else the GPU activity window.",
)
@click.option(
    "--tokens-per-step",
    "tokens",
    multiple=True,
    type=click.FloatRange(min=0, min_open=True),
    metavar="N",
    help="Tokens each step produces (the decode batch size), in profile order (repeat once per profile): "
    "the verdict and the gate are then per token.",
)
@rules_option
@nsys_option
@click.option("-v", "--verbose", is_flag=True, help="Also show the notes under the tables and each profile's notes.")
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
def compare(profiles, labels, report, fail_on_regression, metric, tokens, rules_dirs, nsys_path, verbose, quiet):
    """Compare profiles of the same workload in different configurations: side by side, per
    phase, with a verdict that names the main cause of the difference, and a regression gate.

    Each PROFILE is what analyze takes for one run: a timeline (Nsight Systems or nvprof), an
    Nsight Compute report, or both joined by a comma (run.sqlite,kernels.ncu-rep). The first
    profile is the baseline; the verdict and the gate compare the last one with it.

    \b
    Examples:
      nsight-doctor compare eager.nsys-rep graphs.nsys-rep --label eager --label graphs
      nsight-doctor compare b256.sqlite b512.sqlite b1024.sqlite --format markdown
      nsight-doctor compare base.sqlite new.sqlite --fail-on-regression 10
      nsight-doctor compare b1.sqlite b512.sqlite --tokens-per-step 1 --tokens-per-step 512
      nsight-doctor compare base.sqlite new.sqlite --format html -o compare.html
    """
    from nsight_doctor.compare import CompareOptions
    from nsight_doctor.compare import compare as run_compare
    from nsight_doctor.engine import AnalyzeOptions
    from nsight_doctor.reports import profile_stem, write_comparison

    if len(profiles) < 2:
        raise click.UsageError("compare needs at least two profiles (to diagnose one, use: nsight-doctor analyze)")
    if len(profiles) > 8:
        raise click.UsageError("compare takes at most 8 profiles")
    labels_for(profiles, labels, profile_stem)  # fails before any analysis
    if tokens and len(tokens) != len(profiles):
        raise click.BadParameter(
            f"given {len(tokens)} times for {len(profiles)} profiles; give it once per profile",
            param_hint="--tokens-per-step",
        )
    if metric == "token" and not tokens:
        raise click.BadParameter("the metric 'token' needs --tokens-per-step", param_hint="--metric")
    report.check()
    progress = Progress(enabled=not quiet and sys.stderr.isatty())
    command = "nsight-doctor " + shlex.join(sys.argv[1:])

    def options_for(label):
        def step(s):
            progress(f"{label}: {s}")

        return AnalyzeOptions(
            rules_dirs=rules_dirs,
            nsys=nsys_path,
            command=command,
            progress=step,
            report_data=report.needs_data,
        )

    try:
        analyzed = analyze_profiles(profiles, labels, options_for)
    finally:
        progress.done()
    comparison = run_compare(
        analyzed, CompareOptions(metric=metric, tokens_per_step=list(tokens), fail_on_regression=fail_on_regression)
    )
    stem = f"{profile_stem(profiles[0].split(',')[0])}-vs-{profile_stem(profiles[-1].split(',')[0])}"
    out, said = write_comparison(comparison, report, stem, color=sys.stdout.isatty(), verbose=verbose)
    if out is not None:
        click.echo(out, nl=False)
    for line in said if not quiet else []:
        click.echo(f"nsight-doctor: {line}", err=True)
    return EXIT_FINDINGS if comparison.gate.failed else 0


def one_timeline(inputs) -> None:
    """Fails at once when analyze is given two timelines (compressed ones are found when they are
    read): comparing profiles is compare's job."""
    from nsight_doctor.ingest import SECOND_TIMELINE
    from nsight_doctor.ingest.detect import detect

    timelines = [p for p in inputs if detect(p).kind in ("nsys-rep", "nsys-sqlite", "nsys-parquet", "nvprof")]
    if len(timelines) > 1:
        raise DoctorError(SECOND_TIMELINE.format(path=timelines[1]))


@main.group()
def rules():
    """List, explain and test the rules."""


@rules.command("list")
@rules_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def rules_list(rules_dirs, fmt):
    """List every rule with its severity and tags.

    \b
    Example:
      nsight-doctor rules list
    """
    from nsight_doctor.rules import load_rules

    all_rules, warnings = load_rules(rules_dirs)
    if fmt == "json":
        click.echo(
            json.dumps(
                [
                    {
                        "id": r.id,
                        "name": r.name,
                        "severity": r.severity,
                        "tags": r.tags,
                        "requires": r.requires,
                        "thresholds": {n: {"default": t.default, "doc": t.doc} for n, t in r.thresholds.items()},
                    }
                    for r in all_rules
                ],
                indent=2,
            )
        )
        return 0
    width = max(len(r.id) for r in all_rules)
    for r in all_rules:
        click.echo(sanitize(f"{r.id.ljust(width)}  {r.severity:8s}  {r.name}  [{', '.join(r.tags)}]"))
    for w in warnings:
        click.echo(f"warning: {one_line(w)}", err=True)
    return 0


@rules.command("explain")
@click.argument("rule_id")
@rules_option
def rules_explain(rule_id, rules_dirs):
    """Explain a rule: what it detects, why it matters, its evidence, what to do.

    \b
    Example:
      nsight-doctor rules explain launch-bound
    """
    from nsight_doctor.docgen.rules import rule_page
    from nsight_doctor.rules import load_rules

    all_rules, _ = load_rules(rules_dirs)
    by_id = {r.id: r for r in all_rules}
    if rule_id not in by_id:
        raise DoctorError(f"no rule '{rule_id}' (see: nsight-doctor rules list)")
    click.echo(sanitize(rule_page(by_id[rule_id])), nl=False)  # a user rule's text is untrusted
    return 0


@rules.command("test")
@click.argument("rule_ids", nargs=-1)
@rules_option
def rules_test(rule_ids, rules_dirs):
    """Run the test cases beside each rule (<id>.test.yaml).

    \b
    Example:
      nsight-doctor rules test --rules my-rules/
    """
    from nsight_doctor.rule_tests import run_file
    from nsight_doctor.rules import load_rules

    all_rules, _ = load_rules(rules_dirs)
    chosen = [r for r in all_rules if not rule_ids or r.id in rule_ids]
    failed = 0
    for rule in chosen:
        if rule.test_path is None:
            click.echo(f"{rule.id}: no test file")
            failed += 1
            continue
        for result in run_file(rule, rule.test_path):
            status = "ok" if result.ok else "FAIL"
            click.echo(one_line(f"{rule.id}: {result.name}: {status}{' - ' + result.detail if result.detail else ''}"))
            failed += not result.ok
    return EXIT_FINDINGS if failed else 0


@rules.command("docs")
@click.argument("out_dir", type=click.Path(file_okay=False))
@rules_option
@click.option("--check", is_flag=True, help="Fail (exit 1) if the pages in OUT_DIR are not current.")
def rules_docs(out_dir, rules_dirs, check):
    """Write one Markdown page per rule into OUT_DIR (docs/rules in this repository).

    \b
    Example:
      nsight-doctor rules docs docs/rules --check
    """
    from nsight_doctor.docgen.rules import write_rule_pages
    from nsight_doctor.rules import load_rules

    all_rules, _ = load_rules(rules_dirs)
    stale = write_rule_pages(all_rules, out_dir, check=check)
    if check and stale:
        click.echo("out of date: " + ", ".join(stale) + " (run: nsight-doctor rules docs " + out_dir + ")", err=True)
        return EXIT_FINDINGS
    return 0


# Comparing: the profile arguments, their labels, and their analyses.


LABEL_OK = re.compile(r"^[^\x00-\x1f\x7f]{1,64}$")


def labels_for(paths: Sequence[str], labels: Sequence[str], stem: Callable[[str], str]) -> list[str]:
    """--label values, or each profile's file name without its suffixes (made unique)."""
    from nsight_doctor.compare import CompareError

    if labels and len(labels) != len(paths):
        raise CompareError(f"--label was given {len(labels)} times for {len(paths)} profiles")
    out = list(labels) or [stem(p.split(",")[0]) for p in paths]
    for lab in out:
        if not LABEL_OK.match(lab):
            raise CompareError(f"bad label {lab!r}: 1 to 64 printable characters")
    if not labels:
        seen: dict[str, int] = {}
        for i, lab in enumerate(out):
            seen[lab] = seen.get(lab, 0) + 1
            if seen[lab] > 1:
                out[i] = f"{lab}#{seen[lab]}"
    elif len(set(out)) != len(out):
        raise CompareError("the labels must differ from each other")
    return out


def profile_files(arg: str) -> list[str]:
    """The files of one profile argument: a path as it is when it exists, else files joined by
    commas (a timeline and its Nsight Compute reports: run.sqlite,kernels.ncu-rep)."""
    from pathlib import Path

    if Path(arg).exists() or "," not in arg:
        return [arg]
    return [p for p in (x.strip() for x in arg.split(",")) if p]


def analyze_profiles(
    args: Sequence[str],
    labels: Sequence[str],
    options_for: Callable[[str], object],
) -> list[Profile]:
    """Runs the analysis of each profile argument (engine.analyze), with the options that
    ``options_for(label)`` gives (an AnalyzeOptions)."""
    from nsight_doctor import engine
    from nsight_doctor.compare import Profile
    from nsight_doctor.reports import profile_stem

    names = labels_for(args, labels, profile_stem)
    out = []
    for arg, label in zip(args, names):
        opts = options_for(label)
        assert isinstance(opts, engine.AnalyzeOptions)
        out.append(Profile(label, arg, engine.analyze(profile_files(arg), opts)))
    return out


def _register_archive() -> None:
    from nsight_doctor.archive.commands import register

    register(main)


_register_archive()

if __name__ == "__main__":
    main()
