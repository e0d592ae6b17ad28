"""Cached re-analysis: a finished diagnosis kept by content, so that analysing an unchanged
file again skips ingest and rules altogether.

- A profile is identified by the sha256 of its content (of its files, by name, for a Parquet
  folder). Hashes are remembered per path with the file's size, mtime and inode, so an
  unchanged file is not read again.
- An analysis is identified by the *analysis digest*: nsight-doctor's own code and data files,
  the rules that run (their text, after --select/--ignore and --threshold), and --gaps. Any
  change to any of them gives a new digest, so a cached diagnosis is never stale.
- Cached diagnoses are JSON files under ``<cache>/diagnoses/`` (never pickles: nothing in the
  cache can run code). ``Diagnosis`` is rebuilt from JSON through the same typed sections
  that produced it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nsight_doctor.cachedir import cache_dir, code_digest, write_atomic
from nsight_doctor.model import Diagnosis, Finding, Rule, Skipped
from nsight_doctor.sections import Summary

CACHE_FORMAT = 1


def cache_root() -> Path:
    return cache_dir()


def analysis_digest(rules: Sequence[Rule], largest_gaps: int) -> str:
    """What decides a diagnosis besides the input: the code, the rules as they will run
    (thresholds included), and the options that change the summary."""
    h = hashlib.sha256(code_digest().encode())
    for r in rules:
        h.update(repr(dataclasses.replace(r, path=None, test_path=None)).encode())
    h.update(f"|gaps={largest_gaps}|format={CACHE_FORMAT}".encode())
    return h.hexdigest()


# --- content hashes, remembered per path --------------------------------------------------------


def file_sha256(p: Path) -> str:
    h = hashlib.sha256()
    if p.is_dir():
        for f in sorted(x for x in p.rglob("*") if x.is_file()):
            h.update(str(f.relative_to(p)).encode() + b"\0")
            with open(f, "rb") as fh:
                while chunk := fh.read(1 << 20):
                    h.update(chunk)
            h.update(b"\0")
    else:
        with open(p, "rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
    return h.hexdigest()


def stat_ident(p: Path) -> str:
    if p.is_dir():
        parts = [f"{f.name}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in sorted(p.rglob("*")) if f.is_file()]
        st = p.stat()
        return f"dir|{p.resolve()}|{st.st_ino}|{'|'.join(parts)}"
    st = p.stat()
    return f"file|{p.resolve()}|{st.st_ino}|{st.st_size}|{st.st_mtime_ns}"


def content_sha256(path: str | os.PathLike) -> str:
    """The sha256 of a file or folder, remembered for as long as its size and mtime stay."""
    p = Path(path)
    key = hashlib.sha256(stat_ident(p).encode()).hexdigest()
    memo = cache_root() / "hashes" / key[:2] / key
    try:
        return memo.read_text().strip()
    except OSError:
        pass
    digest = file_sha256(p)
    try:
        write_atomic(memo, digest)
    except OSError:
        pass  # a read-only cache only costs speed
    return digest


def inputs_key(inputs: Sequence[str | os.PathLike]) -> str | None:
    """The identity of a list of inputs, by content and in order (None when one cannot be
    read: the analysis then reports that in its own words)."""
    try:
        return hashlib.sha256("|".join(content_sha256(p) for p in inputs).encode()).hexdigest()
    except OSError:
        return None


# --- Diagnosis as JSON and back ------------------------------------------------------------------


def diagnosis_to_json(d: Diagnosis) -> dict[str, Any]:
    return {
        "tool": d.tool,
        "command": d.command,
        "inputs": d.inputs,
        "summary": d.summary.to_json(),
        "findings": [{k: v for k, v in dataclasses.asdict(f).items()} for f in d.findings],
        "skipped": [dataclasses.asdict(s) for s in d.skipped],
        "notes": d.notes,
    }


def diagnosis_from_json(data: dict[str, Any]) -> Diagnosis:
    return Diagnosis(
        tool=data["tool"],
        command=data["command"],
        inputs=data["inputs"],
        summary=section_from_json(Summary, data["summary"]),
        findings=[Finding(**f) for f in data["findings"]],
        skipped=[Skipped(**s) for s in data["skipped"]],
        notes=list(data["notes"]),
    )


def section_from_json(cls: Any, data: dict[str, Any]) -> Any:
    """The inverse of sections.to_json: flattened children are read from the parent's keys,
    optional children that were left out are None."""
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.metadata.get("flatten"):
            kwargs[f.name] = section_from_json(hints[f.name], data)
        elif f.name in data:
            kwargs[f.name] = value_from_json(hints[f.name], data[f.name])
        elif f.default is not dataclasses.MISSING:
            kwargs[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            kwargs[f.name] = f.default_factory()
        else:
            kwargs[f.name] = None
    return cls(**kwargs)


def value_from_json(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return value_from_json(inner[0], value) if len(inner) == 1 else value
    if origin is list:
        return [value_from_json(args[0], v) for v in value]
    if origin is dict:
        return {k: value_from_json(args[1], v) for k, v in value.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return section_from_json(tp, value)
    return value


# --- the local cache -----------------------------------------------------------------------------


def entry_path(inputs_id: str, digest: str) -> Path:
    key = hashlib.sha256(f"{inputs_id}|{digest}".encode()).hexdigest()
    return cache_root() / "diagnoses" / key[:2] / f"{key}.json"


def load(inputs_id: str, digest: str) -> Diagnosis | None:
    try:
        data = json.loads(entry_path(inputs_id, digest).read_text())
        if data.get("format") != CACHE_FORMAT or data.get("digest") != digest:
            return None
        return diagnosis_from_json(data["diagnosis"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # a missing or unreadable entry is a miss, never an error


def save(inputs_id: str, digest: str, d: Diagnosis) -> None:
    data = {"format": CACHE_FORMAT, "digest": digest, "diagnosis": diagnosis_to_json(d)}
    try:
        write_atomic(entry_path(inputs_id, digest), json.dumps(data, default=str))
    except (OSError, TypeError, ValueError):
        pass  # caching is best effort


# --- a fleet database as a cache -------------------------------------------------------------------


def is_fleet(db: str | os.PathLike) -> bool:
    """Whether a database is a fleet database (nsight-doctor ingest), not one analysis' store."""
    import duckdb

    try:
        con = duckdb.connect(str(db), read_only=True)
    except duckdb.Error:
        return False
    try:
        names = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    finally:
        con.close()
    return {"profiles", "diagnoses"} <= names


def fleet_lookup(
    db: str | os.PathLike, inputs: Sequence[str | os.PathLike], digest: str
) -> tuple[Diagnosis | None, str]:
    """The diagnosis a fleet database holds for these inputs' content, and why not when it
    holds none: one input, found by its content among the fleet's files, analysed with the
    same digest."""
    import duckdb

    if len(inputs) != 1:
        return None, "it keeps one profile per file (a group is looked up by its files only in ingest)"
    try:
        sha = content_sha256(inputs[0])
    except OSError:
        return None, "the input cannot be read"
    try:
        con = duckdb.connect(str(db), read_only=True)
    except duckdb.Error:
        return None, "it is being written (an ingest is running)"
    try:
        row = con.execute(
            "SELECT profile_id FROM profiles WHERE profile_id = ? "
            "UNION ALL SELECT profile_id FROM files WHERE content_sha256 = ? LIMIT 1",
            [sha, sha],
        ).fetchone()
        if row is None:
            return None, "this content is not in it (nsight-doctor ingest adds it)"
        found = con.execute(
            "SELECT diagnosis FROM diagnoses WHERE profile_id = ? AND analysis_digest = ?", [row[0], digest]
        ).fetchone()
    finally:
        con.close()
    if found is None:
        return None, "it holds an analysis by other code, rules or options (ingest --reanalyze updates it)"
    try:
        return diagnosis_from_json(json.loads(found[0])), ""
    except (ValueError, KeyError, TypeError):
        return None, "its diagnosis of this profile cannot be read"
