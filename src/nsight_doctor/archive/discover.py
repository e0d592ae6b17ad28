"""Finding the profiles under the paths given to ``ingest``, and identifying them by content.

- Folders are walked (hidden entries and the fleet database's own files are skipped); a
  folder written by ``nsys export --type parquetdir`` is one profile.
- Tar archives (``.tar``, ``.tar.gz``, ``.tgz``, ``.tar.xz``, ``.tar.bz2``) and ``.zip`` files
  are unpacked once into the cache folder and walked like folders; their members are named
  ``ARCHIVE!MEMBER``.
- Every other file is recognised by its content (ingest/detect.py); a file that is not a
  profile is skipped, unless its name says it should be one (``.nsys-rep``, ``.sqlite``, ...):
  then it is a failure.
- Pairing: a report (``run.nsys-rep``, ``run.qdrep``) and its exports beside it (``run.sqlite``,
  ``run_pqtdir/``, ``run.<anything>.sqlite``, compressed copies of those) are ONE profile. The
  export is analysed (the newest first, then the report itself if every export fails), and the
  report's content identifies the profile, so it stays the same profile when the export is
  added, replaced or removed.
- ``--group folder``: a folder holding exactly one timeline (after pairing) and Nsight Compute
  reports is one profile, analysed together (kernel findings weighted by timeline time).
  Otherwise every timeline and every Nsight Compute report is its own profile.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import zipfile
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from nsight_doctor.analysis_cache import content_sha256
from nsight_doctor.cachedir import private_dir
from nsight_doctor.errors import InputError
from nsight_doctor.ingest import cache
from nsight_doctor.ingest.detect import KNOWN_SUFFIXES, detect, is_nsys_parquet_dir

TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2", ".tbz2")
ZIP_SUFFIXES = (".zip",)
REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
TIMELINE_KINDS = {"nsys-rep", "nsys-sqlite", "nsys-parquet", "nvprof"}
SKIP_SUFFIXES = (".duckdb", ".duckdb.wal", ".duckdb.lock", ".wal")


@dataclass
class Member:
    """One file (or Parquet folder) of a profile."""

    path: str  # as shown to the user: a real path, or ARCHIVE!MEMBER
    local: Path  # where it can be read
    kind: str  # detected kind, or the kind its name says for compressed copies
    role: str = "profile"  # profile, report, export or member
    size: int = 0
    mtime_ns: int = 0
    sha: str | None = None


@dataclass
class Unit:
    """One profile to be: its files, how to analyse it, and its identity."""

    members: list[Member]
    kind: str
    candidates: list[list[Member]]  # the input lists to try, in order
    primary: Member  # the file whose content identifies it (or the group's first)
    error: str | None = None  # a file that should be a profile but is not
    error_type: str | None = None
    profile_id: str | None = None

    @property
    def paths(self) -> list[str]:
        return [m.path for m in self.members]


@dataclass
class Found:
    units: list[Unit] = field(default_factory=list)
    skipped: int = 0  # files that are not profiles


def stat_of(p: Path) -> tuple[int, int]:
    if p.is_dir():
        files = [f for f in p.rglob("*") if f.is_file()]
        return sum(f.stat().st_size for f in files), max((f.stat().st_mtime_ns for f in files), default=0)
    st = p.stat()
    return st.st_size, st.st_mtime_ns


def is_archive(p: Path) -> str | None:
    name = p.name.lower()
    if name.endswith(TAR_SUFFIXES):
        return "tar"
    if name.endswith(ZIP_SUFFIXES):
        return "zip"
    return None


def unpack_archive(p: Path, kind: str) -> Path:
    """Unpacks an archive into the cache folder, once per archive content (path, size, mtime)."""
    st = p.stat()
    key = hashlib.sha256(f"{p.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:20]
    dest = cache.cache_dir() / "archives" / key
    if dest.is_dir():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = private_dir(".partial-", dest.parent)
    try:
        tmp.mkdir(mode=0o700)
        if kind == "tar":
            with tarfile.open(p) as tf:
                members = [m for m in tf.getmembers() if m.isfile() or m.isdir()]
                tf.extractall(tmp, members=members, filter="data")
        else:
            with zipfile.ZipFile(p) as zf:
                for info in zf.infolist():
                    target = (tmp / info.filename).resolve()
                    if not str(target).startswith(str(tmp.resolve())):
                        raise InputError(f"'{p}': a member's path leaves the archive ({info.filename})")
                zf.extractall(tmp)
        os.replace(tmp, dest)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)  # (also on Ctrl-C)
        if isinstance(e, (OSError, tarfile.TarError, zipfile.BadZipFile, EOFError)):
            raise InputError(f"'{p}' could not be unpacked ({e}): truncated or corrupt") from None
        raise
    return dest


def walk(paths: Iterable[str | os.PathLike], skip: Iterable[Path] = ()) -> Iterator[tuple[Path, str, str | None]]:
    """(local path, shown path, archive error) for every candidate file or Parquet folder."""
    skipped = {Path(s).resolve() for s in skip}

    def visit(local: Path, shown: str) -> Iterator[tuple[Path, str, str | None]]:
        if local.resolve() in skipped or local.name.endswith(SKIP_SUFFIXES):
            return
        if local.is_dir():
            if is_nsys_parquet_dir(local):
                yield local, shown, None
                return
            for child in sorted(local.iterdir()):
                if not child.name.startswith("."):
                    yield from visit(child, f"{shown.rstrip('/')}/{child.name}")
            return
        if not local.is_file():
            return
        kind = is_archive(local)
        if kind:
            try:
                root = unpack_archive(local, kind)
            except InputError as e:
                yield local, shown, str(e)
                return
            for child in sorted(root.iterdir()):
                yield from visit(child, f"{shown}!{child.name}")
            return
        yield local, shown, None

    for p in paths:
        p = Path(p)
        if not p.exists():
            raise InputError(f"'{p}': no such file or directory")
        yield from visit(p, str(p))


def named_kind(name: str) -> str | None:
    """The kind a compressed copy's name says it holds (run.sqlite.xz: nsys-sqlite)."""
    inner = name.lower()
    for ext in (".xz", ".gz"):
        inner = inner.removesuffix(ext)
    if inner.endswith(REPORT_SUFFIXES):
        return "nsys-rep"
    if inner.endswith((".sqlite", ".db")):
        return "nsys-sqlite"
    if inner.endswith(".ncu-rep"):
        return "ncu-rep"
    if inner.endswith((".nvvp", ".prof")):
        return "nvprof"
    return None


def discover(paths: Iterable[str | os.PathLike], group: str = "none", skip: Iterable[Path] = ()) -> Found:
    """Every profile under the paths, paired and grouped (not yet identified)."""
    found = Found()
    by_folder: dict[str, list[Member]] = {}
    for local, shown, archive_error in walk(paths, skip):
        if archive_error:
            m = Member(shown, local, "archive")
            found.units.append(Unit([m], "archive", [], m, archive_error, "InputError"))
            continue
        try:
            kind = detect(local).kind
        except InputError as e:
            # Only a file whose name says it is a profile is a failure; the rest is not ours.
            if local.name.lower().endswith(tuple(KNOWN_SUFFIXES)):
                m = Member(shown, local, "unknown")
                found.units.append(Unit([m], "unknown", [], m, str(e).replace(str(local), shown), "InputError"))
            else:
                found.skipped += 1
            continue
        if kind in ("xz", "gzip"):
            inner = named_kind(local.name)
            if inner is None:
                found.skipped += 1
                continue
            kind = inner
        folder = shown.rsplit("/", 1)[0] if "/" in shown else "."
        by_folder.setdefault(folder, []).append(Member(shown, local, kind))
    for members in by_folder.values():
        found.units += pair(members, group)
    return found


def base_name(m: Member) -> str:
    return m.path.rsplit("/", 1)[-1].rsplit("!", 1)[-1]


def pair(members: list[Member], group: str) -> list[Unit]:
    """A folder's files as profiles: each report with its exports, then --group folder."""
    reports = [m for m in members if m.kind == "nsys-rep"]
    exports = [m for m in members if m.kind in ("nsys-sqlite", "nsys-parquet")]
    taken: dict[int, list[Member]] = {id(r): [] for r in reports}
    for e in exports:
        name = base_name(e)
        owners = []
        for r in reports:
            rname = base_name(r)
            stem = rname[: -len(".qdrep")] if rname.lower().endswith(".qdrep") else rname.rsplit(".", 1)[0]
            if name == stem + "_pqtdir" or name.startswith(stem + "."):
                owners.append((len(stem), r))
        if owners:
            taken[id(max(owners, key=lambda o: o[0])[1])].append(e)
    paired = {id(e) for es in taken.values() for e in es}
    units: list[Unit] = []
    for r in reports:
        r.role = "report" if taken[id(r)] else "profile"
        exps = sorted(taken[id(r)], key=export_preference)
        for e in exps:
            e.role = "export"
        for m in [r, *exps]:
            m.size, m.mtime_ns = stat_of(m.local)
        usable = [e for e in exps if e.mtime_ns >= r.mtime_ns - 2_000_000_000]
        stale = [e for e in exps if e not in usable]
        cands = [[e] for e in usable] + [[r]] + [[e] for e in stale]
        units.append(Unit([r, *exps], "nsys-rep", cands, r))
    for m in members:
        if m.kind != "nsys-rep" and id(m) not in paired:
            m.size, m.mtime_ns = stat_of(m.local)
            units.append(Unit([m], m.kind, [[m]], m))
    if group == "folder":
        units = group_folder(units)
    return units


def export_preference(e: Member) -> tuple:
    """Parquet folders first, then plain SQLite, newest-named first, then compressed copies."""
    name = base_name(e)
    return (e.kind != "nsys-parquet", name.lower().endswith((".xz", ".gz")), [-ord(c) for c in name])


def group_folder(units: list[Unit]) -> list[Unit]:
    timelines = [u for u in units if u.kind in TIMELINE_KINDS]
    ncu = [u for u in units if u.kind == "ncu-rep"]
    if len(timelines) != 1 or not ncu:
        return units
    t = timelines[0]
    extra = [u.primary for u in ncu]
    for m in extra:
        m.role = "member"
    grouped = Unit(
        [*t.members, *extra],
        "group",
        [[*c, *extra] for c in t.candidates],
        t.primary,
    )
    return [u for u in units if u is not t and u not in ncu] + [grouped]


# --- identity ---------------------------------------------------------------------------------


def identify(units: list[Unit], known: dict[str, tuple[int, int, str]], jobs: int = 2) -> None:
    """Sets each member's sha256 (reusing `known` {path: (size, mtime_ns, sha)} for files
    unchanged since the last ingest) and each unit's profile_id."""
    todo: list[Member] = []
    for u in units:
        for m in u.members:
            if not m.size and not m.mtime_ns and u.error is None:
                m.size, m.mtime_ns = stat_of(m.local)
            memo = known.get(m.path)
            if memo and memo[0] == m.size and memo[1] == m.mtime_ns:
                m.sha = memo[2]
            elif u.error is None or m.local.is_file():
                todo.append(m)

    def one(m: Member) -> None:
        try:
            m.sha = content_sha256(m.local)
        except OSError:
            m.sha = None

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
        list(ex.map(one, todo))
    for u in units:
        if u.kind == "group":
            ids = sorted(m.sha or "" for m in u.members if m.role in ("profile", "report", "member"))
            u.profile_id = hashlib.sha256(("group:" + ",".join(ids)).encode()).hexdigest()
        else:
            u.profile_id = u.primary.sha
        if u.error is None and (u.profile_id is None or any(m.sha is None for m in u.members)):
            u.error, u.error_type = f"'{u.primary.path}' could not be read", "InputError"
