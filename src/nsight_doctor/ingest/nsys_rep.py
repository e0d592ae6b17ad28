"""Turns an Nsight Systems report (.nsys-rep, .qdrep) into an export nsight-doctor can read.

nsys itself is the only reader of reports, so it runs as a subprocess:
``nsys export --type parquetdir`` where the installed nsys has it (it ingests several times
faster than SQLite: see docs/performance.md), ``--type sqlite`` otherwise.

Order of preference for the export:
1. an export beside the report, when it is at least as new as the report and complete:
   ``run_pqtdir/`` or ``run.sqlite`` (as ``nsys stats`` reuses it), a compressed
   ``run.sqlite.xz`` or ``run.sqlite.gz`` (decompressed into the cache folder; the bundled
   samples ship their exports that way), or ``run.export-nsys<VERSION>.sqlite`` (exports
   labelled with the nsys that made them, as in the shared corpus; the newest first);
2. an earlier export of the same report in the cache folder;
3. a new export, written beside the report when that folder is writable (so that nsys stats
   and the GUI reuse it too), else in the cache folder. It is written under a temporary name
   and renamed when complete, so an interrupted export never looks complete. An export that
   runs longer than its timeout (--export-timeout) is stopped with its whole process group,
   and its partial output removed.

A report that does not end with nsys's end-of-report marker is truncated (every complete
report does, from the .qdrep files of 2020 to the .nsys-rep files of 2026.1): that is said
before anything else, rather than blaming the nsys version.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from nsight_doctor.cachedir import scratch_dir
from nsight_doctor.errors import InputError, ReportVersionError, ResourceError, ToolMissingError
from nsight_doctor.ingest import cache
from nsight_doctor.ingest.detect import sqlite_tables

# Where nsys usually lives when it is not on PATH; the last one is the nsys that Nsight
# Compute bundles.
NSYS_GLOBS = [
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/opt/nvidia/nsight-systems/*/target-linux-x64/nsys",
    "/usr/local/cuda/bin/nsys",
    "/usr/local/cuda-*/bin/nsys",
    "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys",
]

# What an nsys prints when a report is newer than it can read.
TOO_NEW_PATTERNS = ("Version not supported", "Version number is invalid", "ProtobufParseException")

# How often the progress line shows the export's elapsed time (seconds).
PROGRESS_INTERVAL = 1.0

VERSION_RE = re.compile(rb"(20\d\d)\.(\d{1,2})\.(\d+)(?:\.(\d+))?")
HEADER_RE = re.compile(rb"^NVIDIA Tegra Profiler Report (\d{4})@(\d+)@(\d+)@(\d+)")


@dataclass(frozen=True)
class Nsys:
    path: str
    version: str  # e.g. "2022.4.2.1"

    def supports_parquet(self) -> bool:
        return version_tuple(self.version) >= (2024, 1)

    def export_options(self) -> list[str]:
        """Options for `nsys export` that keep what the analysis reads: the Python samples'
        payload (their frames) is dropped unless --include-json=true, which older nsys lack."""
        return ["--include-json", "true"] if export_has_option(self.path, "--include-json") else []


@lru_cache(maxsize=8)
def export_has_option(path: str, option: str) -> bool:
    """Whether this nsys's `export` accepts the option (from its help text)."""
    try:
        out = subprocess.run([path, "export", "--help"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return option in out.stdout + out.stderr


@dataclass(frozen=True)
class Export:
    path: Path  # what is read
    form: str  # "sqlite" or "parquet"
    reused: bool
    found: Path | None = None  # the file found beside the report, when path is its decompressed copy

    @property
    def shown(self) -> Path:
        """The export as the user knows it."""
        return self.found or self.path


def version_tuple(v: str | None) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v or ""))


def report_version(path: Path) -> str | None:
    """The nsys version that wrote a report, from its header (2023.4 and newer) or trailer.

    Every report ends with a small record that holds the full version string; some
    2023.4+ builds also put it in the first line, as YYYY@M@P@B.
    """
    with open(path, "rb") as f:
        head = f.read(128)
        m = HEADER_RE.match(head)
        if m:
            return ".".join(x.decode() for x in m.groups())
        f.seek(max(0, path.stat().st_size - 4096))
        tail = f.read()
    m = VERSION_RE.search(tail)
    return ".".join(x.decode() for x in m.groups() if x) if m else None


def find_nsys(explicit: str | None = None) -> str | None:
    """--nsys PATH, then $NSYS, then PATH, then the usual install folders (newest first)."""
    for candidate in (explicit, os.environ.get("NSYS")):
        if candidate:
            if Path(candidate).is_file() and os.access(candidate, os.X_OK):
                return candidate
            raise ToolMissingError(f"nsys not found at '{candidate}' (from --nsys or $NSYS)")
    on_path = shutil.which("nsys")
    if on_path:
        return on_path
    found = [p for pattern in NSYS_GLOBS for p in glob.glob(pattern) if os.access(p, os.X_OK)]
    found.sort(key=lambda p: version_tuple(p), reverse=True)
    return found[0] if found else None


def nsys_version(path: str) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ToolMissingError(f"nsys at '{path}' does not run: {e}") from None
    m = re.search(r"(\d{4}\.\d+\.\d+(?:\.\d+)?)", out.stdout + out.stderr)
    return m.group(1) if m else "unknown"


# Every complete report ends with this marker (then at most some whitespace).
END_MARKER = b"[END]"


def check_complete(report: Path) -> None:
    """Raises InputError when the report lacks the end-of-report marker: it was cut short
    (an interrupted copy or download, a capture still being written)."""
    size = report.stat().st_size
    with open(report, "rb") as f:
        f.seek(max(0, size - 64))
        tail = f.read()
    if not tail.rstrip(b" \t\r\n\x00").endswith(END_MARKER):
        raise InputError(
            f"'{report}' is truncated: it lacks the end-of-report marker that every complete "
            "Nsight Systems report has; copy it again, or let the capture finish"
        )


def sibling_exports(report: Path) -> list[tuple[Path, str]]:
    """Exports that may sit beside the report, in order of preference (see the module doc)."""
    stem = report.with_suffix("")
    out = [
        (stem.with_name(stem.name + "_pqtdir"), "parquet"),
        (stem.with_suffix(".sqlite"), "sqlite"),
        (stem.with_suffix(".sqlite.xz"), "xz"),
        (stem.with_suffix(".sqlite.gz"), "gzip"),
    ]
    labelled = sorted(
        report.parent.glob(glob.escape(stem.name) + ".export-nsys*.sqlite"),
        key=lambda p: version_tuple(p.name[len(stem.name) :]),
        reverse=True,
    )
    return out + [(p, "sqlite") for p in labelled]


def is_complete_sqlite(p: Path) -> bool:
    """An export is complete when its metadata table exists (nsys writes it last)."""
    try:
        names = sqlite_tables(p)
    except InputError:
        return False
    return bool(names & {"META_DATA_EXPORT", "EXPORT_META_DATA"})


def is_complete(p: Path, form: str) -> bool:
    if form == "parquet":
        return p.is_dir() and (p / "StringIds.parquet").exists()
    return p.is_file() and is_complete_sqlite(p)


def fresh(export: Path, report: Path) -> bool:
    """An export beside a report is stale only when the report is clearly newer: a copy or
    a git checkout gives both files about the same time, a new capture does not."""
    return export.stat().st_mtime >= report.stat().st_mtime - 2.0


def cache_key(report: Path) -> str:
    st = report.stat()
    ident = f"{report.resolve()}|{st.st_size}|{st.st_mtime_ns}"
    return hashlib.sha256(ident.encode()).hexdigest()[:20]


def find_existing_export(report: Path) -> Export | None:
    for p, form in sibling_exports(report):
        if not p.exists() or not fresh(p, report):
            continue
        found = None
        if form in ("xz", "gzip"):
            try:
                found, p = p, cache.unpack(p, form, p)
            except InputError:
                continue  # a damaged copy is not an export
            form = "sqlite"
        if is_complete(p, form):
            return Export(p, form, reused=True, found=found)
    key = cache_key(report)
    for form, name in (("parquet", f"{key}_pqtdir"), ("sqlite", f"{key}.sqlite")):
        p = cache.exports_dir() / name
        if p.exists() and is_complete(p, form):
            return Export(p, form, reused=True)
    return None


def export_report(
    report: Path, nsys_path: str | None = None, progress=None, timeout: float | None = None
) -> tuple[Export, Nsys | None]:
    """Returns a complete export of the report, running nsys only when needed (for at most
    timeout seconds; None waits as long as it takes)."""
    existing = find_existing_export(report)
    if existing:
        return existing, None
    found = find_nsys(nsys_path)
    rep_version = report_version(report)
    if not found:
        raise ToolMissingError(
            f"'{report}' is an Nsight Systems report, and reading it needs nsys, which was not "
            "found (looked at --nsys, $NSYS, PATH and /opt/nvidia). Install Nsight Systems "
            f"{rep_version or ''} or newer, or run 'nsys export --type sqlite {report.name}' "
            "where it was captured and pass the .sqlite"
        )
    nsys = Nsys(found, nsys_version(found))
    form = "parquet" if nsys.supports_parquet() else "sqlite"
    suffix = "_pqtdir" if form == "parquet" else ".sqlite"
    sibling = report.with_name(report.stem + suffix)
    # Beside the report when allowed and free; an existing file there is never replaced.
    if can_write_beside(report) and not sibling.exists():
        final = sibling
    else:
        final = cache.exports_dir() / (cache_key(report) + suffix)
        remove(final)  # a leftover of ours that did not pass is_complete
    final.parent.mkdir(parents=True, exist_ok=True)
    with scratch_dir(".nsight-doctor-export-", final.parent) as tmpdir:
        out = tmpdir / ("export" + suffix)
        kind = "parquetdir" if form == "parquet" else "sqlite"
        cmd = [
            nsys.path,
            "export",
            "--type",
            kind,
            "--force-overwrite",
            "true",
            *nsys.export_options(),
            "--output",
            str(out),
            str(report),
        ]
        returncode, text = run_export(cmd, tmpdir, timeout, progress, f"nsys export --type {kind}", report, nsys)
        if returncode != 0 or not is_complete(out, form):
            if any(p in text for p in TOO_NEW_PATTERNS):
                raise ReportVersionError(too_new_message(report, rep_version, nsys))
            last = [ln.strip() for ln in text.splitlines() if ln.strip()]
            raise InputError(
                f"nsys {nsys.version} could not export '{report}' (exit {returncode}): "
                f"{last[-1][-300:] if last else 'no message'}"
            )
        os.replace(out, final)
    return Export(final, form, reused=False), nsys


def run_export(
    cmd: list[str], folder: Path, timeout: float | None, progress, step: str, report: Path, nsys: Nsys
) -> tuple[int, str]:
    """Runs nsys in its own process group, showing the elapsed time on the progress line;
    returns (exit code, output). Past the timeout, or on Ctrl-C, the whole group (nsys
    starts helper processes) is killed before the error propagates."""
    log = folder / "nsys-output.txt"
    with open(log, "w+b") as out:
        try:
            proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        except OSError as e:
            raise ToolMissingError(f"nsys at '{nsys.path}' does not run: {e}") from None
        start = time.monotonic()
        try:
            while True:
                elapsed = time.monotonic() - start
                if progress:
                    progress(f"{step} ({elapsed:.0f} s)" if elapsed >= 1 else step)
                wait = PROGRESS_INTERVAL if timeout is None else min(PROGRESS_INTERVAL, max(0.0, timeout - elapsed))
                try:
                    proc.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    if timeout is not None and time.monotonic() - start >= timeout:
                        kill_group(proc)
                        raise ResourceError(
                            f"nsys {nsys.version} did not finish exporting '{report}' within {timeout:g} s "
                            "and was stopped; allow longer with --export-timeout SECONDS, or export it "
                            f"yourself (nsys export --type sqlite {report.name}) and pass the .sqlite"
                        ) from None
        except BaseException:
            kill_group(proc)
            raise
        out.seek(0)
        text = out.read().decode(errors="replace")
    return proc.returncode, text


def kill_group(proc: subprocess.Popen) -> None:
    """Kills a process started with start_new_session=True and everything it started."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        pass


def can_write_beside(report: Path) -> bool:
    """Whether the report's folder may receive its export. Mode bits are checked as well as
    access, because root may write anywhere: a read-only report (no write bit) or folder is
    someone's archive, and gets its export in the cache folder instead."""
    folder = report.parent
    return os.access(folder, os.W_OK) and bool(folder.stat().st_mode & 0o222) and bool(report.stat().st_mode & 0o222)


def remove(p: Path) -> None:
    if p.is_dir():
        shutil.rmtree(p)
    elif p.exists():
        p.unlink()


def too_new_message(report: Path, rep_version: str | None, nsys: Nsys) -> str:
    written = f"Nsight Systems {rep_version}" if rep_version else "a newer Nsight Systems"
    return (
        f"'{report}' was written by {written}, but the nsys found ({nsys.path}, "
        f"{nsys.version}) cannot read it. Export it where it was captured: "
        f"nsys export --type sqlite {report.name}, then pass the .sqlite "
        "(or point --nsys at a newer nsys)"
    )
