"""nsight-doctor compare: several profiles side by side, with a verdict and a regression gate;
and the profile arguments, their labels and their analyses."""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import click

from nsight_doctor.cli.common import EXIT_FINDINGS, Progress, nsys_option, report_options, rules_option

if TYPE_CHECKING:
    from nsight_doctor.compare import Profile


def metric_names() -> list[str]:
    from nsight_doctor.compare import METRICS

    return list(METRICS)


@click.command()
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
