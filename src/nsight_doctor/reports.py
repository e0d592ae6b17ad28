"""Writing reports: where each format goes, the store a notebook needs, and chart images.

The command line's report options (--format, -o/--output, --charts) are handled here, so that
every command that reports (analyze, and compare later) behaves the same way.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import duckdb

from nsight_doctor.db import table_exists
from nsight_doctor.errors import InputError
from nsight_doctor.model import Diagnosis
from nsight_doctor.render import FILE_FORMATS, render, render_bytes

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
        """Fails before the analysis when the report cannot be written (no browser for a PDF)."""
        if self.fmt == "pdf":
            from nsight_doctor.render import pdf

            pdf.require_browser()

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
        store.parent.mkdir(parents=True, exist_ok=True)
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
    from nsight_doctor.render import charts as charts_mod

    said: list[str] = []
    charts = charts_mod.build(d) if req.needs_data else None
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
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
        said.append(f"wrote {out} ({size(len(data))})")
        if req.fmt == "ipynb" and d.store_path:
            said.append(f"its cells reopen the DuckDB store {d.store_path}")
    if req.charts_dir is not None:
        assert charts is not None
        written = charts_mod.export(charts, req.charts_dir)
        said.append(f"wrote {len(written) // 2} charts as PNG and SVG into {req.charts_dir}")
    return stdout_text, said


def size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} KB"
