"""The documentation in the store's own files: each view file's header comment (a first
paragraph "<name>: description", then "column: doc" entries) and the timeline's tables.yaml,
read as data, for docs/schema.md, docs/json.md and the fleet database's schema
(archive/schema.py)."""

from __future__ import annotations

import re

from nsight_doctor.store import documented_views, timeline, view_sql


def view_docs() -> list[tuple[str, str, list[tuple[str, str]]]]:
    """(view, description, [(column, doc)]) parsed from the view files' header comments, and
    declared in timeline/tables.yaml for the timeline's tables."""
    tables = timeline.tables()
    return [
        (name, tables[name].doc, [(c.name, c.doc) for c in tables[name].columns])
        if name in tables
        else (name, *header_docs(name, view_sql(name)))
        for name in documented_views()
    ]


def header_docs(name: str, sql: str) -> tuple[str, list[tuple[str, str]]]:
    """(description, [(column, doc)]) from the header comment of a view or table file: a first
    paragraph "<name>: description", then "column: doc" entries, continuation lines indented."""
    header = []
    for line in sql.splitlines():
        if not line.startswith("--"):
            break
        header.append(line[2:].strip() if line.startswith("-- ") or line == "--" else line[2:])
    paragraphs = "\n".join(header).split("\n\n")
    first = " ".join(paragraphs[0].split())
    m = re.match(rf"{re.escape(name)}: (.*)", first)
    desc = m.group(1) if m else first
    cols: list[tuple[str, str]] = []
    raw = [ln for ln in sql.splitlines() if ln.startswith("--")]
    body = raw[len(paragraphs[0].splitlines()) + 1 :]
    for line in body:
        text = line[3:] if line.startswith("-- ") else line[2:]
        m = re.match(r"([a-z_][a-z0-9_]*): (.*)", text)
        if m and not text.startswith(" "):
            cols.append((m.group(1), m.group(2)))
        elif cols and text.strip():
            cols[-1] = (cols[-1][0], cols[-1][1] + " " + text.strip())
    return desc, cols


def column_docs() -> dict[str, dict[str, str]]:
    return {name: dict(cols) for name, _, cols in view_docs()}
