"""nsight-doctor analyze: one profile's diagnosis."""

from __future__ import annotations

import os
import shlex
import sys

import click

from nsight_doctor.cli.common import (
    EXIT_FINDINGS,
    Progress,
    memory_size,
    nsys_option,
    report_options,
    rules_option,
    split_list,
)
from nsight_doctor.errors import DoctorError
from nsight_doctor.model import SEVERITIES, severity_rank


@click.command()
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
@click.option(
    "--rule-timeout",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    default=300,
    show_default=True,
    help="Stop a rule whose query runs longer than this (a rule file is SQL from anyone).",
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
    rule_timeout,
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
        rule_timeout=rule_timeout,
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


def one_timeline(inputs) -> None:
    """Fails at once when analyze is given two timelines (compressed ones are found when they are
    read): comparing profiles is compare's job."""
    from nsight_doctor.ingest import SECOND_TIMELINE
    from nsight_doctor.ingest.detect import detect

    timelines = [p for p in inputs if detect(p).kind in ("nsys-rep", "nsys-sqlite", "nsys-parquet", "nvprof")]
    if len(timelines) > 1:
        raise DoctorError(SECOND_TIMELINE.format(path=timelines[1]))
