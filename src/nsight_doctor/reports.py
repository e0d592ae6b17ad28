"""Writing reports: where each format goes, the store a notebook needs, and chart images.

The command line's report options (--format, -o/--output, --charts) are handled here, so that
every command that reports (analyze, and compare later) behaves the same way.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from nsight_doctor.db import table_exists
from nsight_doctor.errors import InputError, OutputError
from nsight_doctor.model import Diagnosis
from nsight_doctor.render import FILE_FORMATS, render, render_bytes

if TYPE_CHECKING:  # (compare's modules load only for `compare`)
    from nsight_doctor.compare import Comparison

# Suffixes dropped from a profile's name to name its report (run.nsys-rep.xz -> run.html).
PROFILE_SUFFIXES = (".xz", ".gz", ".nsys-rep", ".qdrep", ".sqlite", ".ncu-rep", ".nvvp", ".prof", "_pqtdir")


@dataclass
class ReportRequest:
    fmt: str = "text"
    output: str | None = None  # None: standard output for text formats, a default name for files
    charts_dir: str | None = None

    @property
    def needs_data(self) -> bool:
        """Whether the report draws charts, so that the analysis must read their data."""
        return self.fmt in FILE_FORMATS or self.charts_dir is not None

    def check(self) -> None:
        """Fails before the analysis when the report cannot be written: no browser for a PDF,
        or an -o whose folder does not exist (it is not made) or that names a folder."""
        if self.fmt == "pdf":
            from nsight_doctor.render import pdf

            pdf.require_browser()
        if self.output:
            out = Path(self.output)
            if out.is_dir():
                raise OutputError(f"cannot write the report to '{out}': it is a folder (from -o)")
            if not out.parent.is_dir():
                raise OutputError(
                    f"cannot write the report to '{out}': the folder '{out.parent}' does not exist (from -o)"
                )

    def output_path(self, inputs: list[str]) -> Path | None:
        if self.output:
            return Path(self.output)
        if self.fmt not in FILE_FORMATS:
            return None
        return Path(profile_stem(inputs[0]) + FILE_FORMATS[self.fmt])

    def store_for(self, inputs: list[str], db: str | None) -> str | None:
        """The store to keep: --db, or for a notebook (whose cells reopen it) a file beside it."""
        if db or self.fmt != "ipynb":
            return db
        out = self.output_path(inputs)
        assert out is not None
        store = out.with_suffix(".duckdb")
        if store.exists():
            if not is_our_store(store):
                raise InputError(
                    f"'{store}' exists and is not an nsight-doctor store; the notebook keeps its store there: "
                    "move it, or name another with --db"
                )
            for p in (store, Path(str(store) + ".wal")):
                p.unlink(missing_ok=True)
        return str(store)


def profile_stem(path: str) -> str:
    name = Path(path.rstrip("/")).name
    changed = True
    while changed:
        changed = False
        for suffix in PROFILE_SUFFIXES:
            if name.endswith(suffix) and len(name) > len(suffix):
                name, changed = name[: -len(suffix)], True
    return name or "report"


def is_our_store(path: Path) -> bool:
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error:
        return False
    try:
        return table_exists(con, "nsight_doctor_meta")
    finally:
        con.close()


def write(
    d: Diagnosis, req: ReportRequest, inputs: list[str], color: bool = False, verbose: bool = False
) -> tuple[str | None, list[str]]:
    """Renders the report: returns (text for standard output or None, lines saying what was written)."""
    said: list[str] = []
    charts = None
    if req.needs_data:
        from nsight_doctor.render import charts as charts_mod  # (Altair's specs: only when a chart is drawn)

        charts = charts_mod.build(d)
    out = req.output_path(inputs)
    stdout_text = None
    options: dict = {}
    if req.fmt == "text":
        options = {"color": color and out is None, "verbose": verbose}
    elif req.fmt in ("html",):
        options = {"charts": charts}
    elif req.fmt == "ipynb":
        assert out is not None
        store = d.store_path
        options = {"charts": charts, "store": os.path.relpath(store, out.parent.resolve()) if store else None}
    if out is None:
        stdout_text = render(d, req.fmt, **options)
    else:
        data = render_bytes(d, req.fmt, **options)
        write_file(out, data)
        said.append(f"wrote {out} ({size(len(data))})")
        if req.fmt == "ipynb" and d.store_path:
            said.append(f"its cells reopen the DuckDB store {d.store_path}")
    if req.charts_dir is not None:
        from nsight_doctor.render import charts as charts_mod

        assert charts is not None
        written = charts_mod.export(charts, req.charts_dir)
        said.append(f"wrote {len(written) // 2} charts as PNG and SVG into {req.charts_dir}")
    return stdout_text, said


def write_file(out: Path, data: bytes) -> None:
    """Writes a report; a path that cannot be written is one line (OutputError), not a traceback."""
    try:
        out.write_bytes(data)
    except OSError as e:
        raise OutputError(f"cannot write the report to '{out}': {e.strerror or e}") from None


def size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} KB"


# Formats of a comparison (nsight-doctor compare): a notebook reopens one store, and a PDF prints
# one diagnosis, so neither applies.
COMPARE_FORMATS = ["text", "markdown", "json", "html"]


def write_comparison(
    c: Comparison, req: ReportRequest, stem: str, color: bool = False, verbose: bool = False
) -> tuple[str | None, list[str]]:
    """Renders a comparison: returns (text for standard output or None, lines saying what was
    written). ``stem`` names the default HTML file; --charts writes each profile's charts into a
    folder of its own (DIR/1-<label>/...)."""
    from nsight_doctor.render import charts as charts_mod
    from nsight_doctor.render import compare as render_compare

    said: list[str] = []
    charts = [charts_mod.build(p.diagnosis) for p in c.profiles] if req.needs_data else None
    out = Path(req.output) if req.output else (Path(stem + ".html") if req.fmt == "html" else None)
    if req.fmt == "text":
        text = render_compare.render_text(c, color=color and out is None, verbose=verbose)
    elif req.fmt == "markdown":
        text = render_compare.render_markdown(c)
    elif req.fmt == "json":
        text = render_compare.render_json(c)
    else:
        from nsight_doctor.render import compare_html

        text = compare_html.render(c, charts=charts)
    if out is None:
        stdout_text: str | None = text
    else:
        data = text.encode("utf-8")
        write_file(out, data)
        said.append(f"wrote {out} ({size(len(data))})")
        stdout_text = None
    if req.charts_dir is not None:
        assert charts is not None
        n = 0
        for i, (p, cs) in enumerate(zip(c.profiles, charts), 1):
            folder = Path(req.charts_dir) / f"{i}-{safe_name(p.label)}"
            n += len(charts_mod.export(cs, folder)) // 2
        said.append(f"wrote {n} charts as PNG and SVG into {req.charts_dir}, one folder per profile")
    return stdout_text, said


def safe_name(label: str) -> str:
    """A label as a file name: letters, digits, '.', '-' and '_' only."""
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("._") or "profile"
