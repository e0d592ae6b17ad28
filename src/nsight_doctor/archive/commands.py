"""The archive's commands: ingest, query, report and export (cli.COMMANDS lists them)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import click

from nsight_doctor.errors import DoctorError, InputError

EXIT_FAILED = 1


def parse_labels(values: tuple[str, ...], option: str = "--label") -> dict[str, str]:
    labels = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"'{item}' is not KEY=VALUE", param_hint=option)
        labels[key.strip()] = value.strip()
    return labels


class IngestProgress:
    """One self-overwriting line on stderr (a terminal only): done, failed, left, rate, ETA.
    Failures are printed as they happen, on a terminal or not."""

    def __init__(self, enabled: bool, quiet: bool):
        self.enabled = enabled
        self.quiet = quiet
        self.last = 0.0

    def __call__(self, c: dict[str, Any]) -> None:
        if "failure" in c and not self.quiet:
            path, error = c["failure"]
            self.clear()
            click.echo(f"failed: {path}: {error}", err=True)
        if not self.enabled:
            return
        if "stage" in c:
            self.show(f"[ingest] {c['stage']}")
            return
        now = time.monotonic()
        if now - self.last < 0.2 and c["done"] < c["total"]:
            return
        self.last = now
        elapsed = now - c["started"]
        rate = c["done"] / elapsed if elapsed > 0 else 0.0
        left = c["total"] - c["done"]
        eta = f", ~{left / rate:.0f} s left" if rate and left else ""
        current = ", ".join(os.path.basename(p) for p in c.get("running", []))
        line = (
            f"[ingest] {c['done']}/{c['total']} done, {c['failed']} failed, {left} remaining, "
            f"{rate:.2f} profiles/s{eta}  {current}"
        )
        self.show(line)

    def show(self, line: str) -> None:
        width = _columns() - 1
        sys.stderr.write("\r\x1b[2K" + (line[:width] if width >= 40 else line))
        sys.stderr.flush()

    def clear(self) -> None:
        if self.enabled:
            sys.stderr.write("\r\x1b[2K")
            sys.stderr.flush()


def _columns() -> int:
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns
    except OSError:
        return 100


@click.command()
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--db", required=True, type=click.Path(dir_okay=False), help="The fleet database (created if new).")
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(1, 512),
    default=None,
    help="Worker processes (default: the number of CPU cores).",
)
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE", help="Label these profiles (repeatable).")
@click.option(
    "--group",
    type=click.Choice(["none", "folder"]),
    default="none",
    show_default=True,
    help="folder: a folder's one timeline and its Nsight Compute reports are one profile.",
)
@click.option("--rules", "rules_dirs", multiple=True, metavar="DIR", help="Also load the rules in DIR (repeatable).")
@click.option("--threshold", "thresholds", multiple=True, metavar="RULE.NAME=VALUE", help="Override a rule threshold.")
@click.option("--nsys", "nsys_path", metavar="PATH", default=None, help="The nsys binary used to export reports.")
@click.option("--retry-failed", is_flag=True, help="Analyse again the files that failed before.")
@click.option(
    "--reanalyze", is_flag=True, help="Analyse again the profiles analysed by another nsight-doctor or other rules."
)
@click.option(
    "--timeout", type=float, default=None, metavar="SECONDS", help="Give up on a profile after this long (a failure)."
)
@click.option(
    "--scheduler",
    metavar="ADDRESS",
    default=None,
    help="Run the analyses on a Dask distributed cluster (tcp://HOST:PORT) instead of local processes.",
)
@click.option(
    "--parts",
    "parts_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Folder for the workers' Parquet parts (default: DB.parts beside the database; shared with --scheduler).",
)
@click.option("-q", "--quiet", is_flag=True, help="No progress and no per-failure lines on stderr.")
def ingest(
    paths,
    db,
    jobs,
    labels,
    group,
    rules_dirs,
    thresholds,
    nsys_path,
    retry_failed,
    reanalyze,
    timeout,
    scheduler,
    parts_dir,
    quiet,
):
    """Analyse every profile under PATH... into one fleet database, in parallel.

    PATH is a profile, a folder (walked), or a .tar/.tar.gz/.zip archive of profiles. A report
    and its export beside it are one profile; the same content under two names is one profile
    with two paths. A rerun skips what is in the database already and completes an interrupted
    run. Exit code 1 when any file failed (table failures), 0 otherwise.

    \b
    Examples:
      nsight-doctor ingest /archive/profiles --db fleet.duckdb --label team=serving
      nsight-doctor ingest runs/ --db fleet.duckdb -j 8
      nsight-doctor ingest /shared/profiles --db fleet.duckdb --scheduler tcp://head:8786 --parts /shared/parts
    """
    from nsight_doctor.archive.ingest import IngestOptions
    from nsight_doctor.archive.ingest import ingest as run_ingest

    overrides = parse_labels(thresholds, "--threshold")
    for key in overrides:
        if "." not in key:
            raise click.BadParameter(f"'{key}' is not RULE.NAME=VALUE", param_hint="--threshold")
    # Each diagnosis also goes into analyze's cache, so that analysing an ingested file is instant.
    analyze_opts: dict[str, Any] = {"cache": not os.environ.get("NSIGHT_DOCTOR_NO_CACHE")}
    if rules_dirs:
        analyze_opts["rules_dirs"] = list(rules_dirs)
    if overrides:
        analyze_opts["thresholds"] = overrides
    if nsys_path:
        analyze_opts["nsys"] = nsys_path
    progress = IngestProgress(enabled=not quiet and sys.stderr.isatty(), quiet=quiet)
    opts = IngestOptions(
        jobs=jobs or os.cpu_count() or 1,
        labels=parse_labels(labels),
        group=group,
        analyze=analyze_opts,
        retry_failed=retry_failed,
        reanalyze=reanalyze,
        scheduler=scheduler,
        parts_dir=parts_dir,
        timeout=timeout,
        progress=progress,
    )
    existed = {p: p.exists() for p in (Path(db), Path(str(db) + ".wal"))}
    try:
        res = run_ingest(paths, db, opts)
    finally:
        progress.clear()
    failed = len(res.failed) + len(res.failed_before)
    # Each profile once: analysed, already in, or failed (those unreadable among them).
    total = res.found + res.unreadable
    if total == 0:
        for p, was in existed.items():
            if not was:
                p.unlink(missing_ok=True)  # no empty database left behind
        n = res.skipped_files
        raise InputError(
            f"no profiles found in {', '.join(str(p) for p in paths)}"
            + (f" ({n:,} {'file of another kind' if n == 1 else 'files of other kinds'})" if n else "")
            + ": ingest reads Nsight Systems reports and exports, Nsight Compute reports and nvprof files, "
            "also inside .tar and .zip archives"
        )
    parts = [f"{res.analysed:,} analysed", f"{res.already:,} already in", f"{failed:,} failed"]
    if res.unreadable:
        parts[-1] += f" ({res.unreadable:,} could not be read)"
    extra = []
    if res.duplicates:
        extra.append(f"{res.duplicates:,} duplicate path{'s' if res.duplicates != 1 else ''}")
    if res.merged_leftovers:
        extra.append(f"{res.merged_leftovers:,} from an interrupted run")
    rate = res.analysed / res.seconds if res.seconds else 0
    click.echo(
        f"{db}: {total:,} profile{'s' if total != 1 else ''}: {', '.join(parts)}"
        + (f"; {', '.join(extra)}" if extra else "")
        + f"; {res.seconds:.1f} s ({rate:.2f} profiles/s)"
    )
    if res.failed_before:
        click.echo(
            f"{len(res.failed_before)} of the failures failed before with the same content and were not "
            "retried (--retry-failed retries them)"
        )
    if failed:
        click.echo(f'see: nsight-doctor query --db {db} "SELECT path, error FROM failures"')
        return EXIT_FAILED
    return 0


@click.command()
@click.argument("sql")
@click.option(
    "--db",
    required=True,
    type=click.Path(dir_okay=False),
    help="A fleet database (ingest) or the store of one analysis (analyze --db).",
)
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True)
def query(sql, db, fmt):
    """Run read-only SQL on a fleet database or on one analysis' store.

    SQL is one statement, or - to read it from standard input. The tables of a fleet database
    are in docs/fleet-schema.md, the views of a store in docs/schema.md.

    \b
    Examples:
      nsight-doctor query --db fleet.duckdb "SELECT rule_id, count(*) FROM findings GROUP BY 1"
      nsight-doctor query --db run.duckdb "SELECT name, sum(duration) FROM kernels GROUP BY 1" --format csv
    """
    from nsight_doctor.archive import query as q

    if sql == "-":
        sql = sys.stdin.read()
    cols, rows = q.run(db, sql)
    click.echo(q.render(cols, rows, fmt), nl=False)
    return 0


@click.command()
@click.option("--db", required=True, type=click.Path(dir_okay=False), help="The fleet database.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "markdown", "json"]),
    default="text",
    show_default=True,
    help="Output format.",
)
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None, help="Write to FILE, not stdout.")
@click.option("--top", type=click.IntRange(1, 1000), default=10, show_default=True, help="Rows per ranking.")
@click.option("--by", "by_labels", multiple=True, metavar="KEY", help="Break findings down by this label (repeatable).")
@click.option(
    "--trend",
    default="capture",
    show_default=True,
    metavar="capture|ingest|label:KEY",
    help="What the trend runs over: capture month, ingest day, or a label's values.",
)
@click.option("--label", "where_labels", multiple=True, metavar="KEY=VALUE", help="Only profiles with this label.")
def report(db, fmt, output, top, by_labels, trend, where_labels):
    """Report on a fleet: worst profiles, recurring findings, breakdowns and trends.

    \b
    Examples:
      nsight-doctor report --db fleet.duckdb
      nsight-doctor report --db fleet.duckdb --format markdown -o fleet.md --by team
      nsight-doctor report --db fleet.duckdb --trend label:commit --label team=serving
    """
    from nsight_doctor.archive.report import build_report, render_report

    if not (trend in ("capture", "ingest") or (trend.startswith("label:") and len(trend) > 6)):
        raise click.BadParameter(f"'{trend}' is not capture, ingest or label:KEY", param_hint="--trend")
    rep = build_report(db, top=top, by_labels=list(by_labels), trend=trend, where=parse_labels(where_labels))
    text = render_report(rep, fmt)
    if output:
        with open(output, "w") as f:
            f.write(text)
    else:
        click.echo(text, nl=False)
    return 0


@click.command()
@click.option("--db", required=True, type=click.Path(dir_okay=False), help="The fleet database.")
@click.option("--parquet", "out", required=True, type=click.Path(file_okay=False), help="The folder to write.")
@click.option(
    "--partition-by",
    default="ingest_date",
    show_default=True,
    metavar="ingest_date|label:KEY",
    help="The Hive partition column: the day each profile was ingested, or a label's value.",
)
@click.option("--overwrite", is_flag=True, help="Replace what the folder holds.")
def export(db, out, partition_by, overwrite):
    """Write every table of a fleet database as Hive-partitioned Parquet.

    One folder per table, partitioned by ingest day or by a label (KEY=VALUE folders), that
    DuckDB, Polars, Spark or Trino read directly.

    \b
    Examples:
      nsight-doctor export --db fleet.duckdb --parquet fleet_parquet/
      nsight-doctor export --db fleet.duckdb --parquet s3-staging/ --partition-by label:team
    """
    from nsight_doctor.archive.export import export_parquet

    if not (partition_by == "ingest_date" or (partition_by.startswith("label:") and len(partition_by) > 6)):
        raise click.BadParameter(f"'{partition_by}' is not ingest_date or label:KEY", param_hint="--partition-by")
    counts = export_parquet(db, out, partition_by, overwrite)
    for table, n in counts.items():
        click.echo(f"{table}: {n:,} rows")
    click.echo(f"written to {out}/ (partitioned by {partition_by})")
    return 0


__all__ = ["DoctorError", "export", "ingest", "query", "report"]
