"""What every summary section is built on: a section is a row of a documented view, its own
fields the view's columns; ``child`` declares the fields that are not (child sections and
derived values); ``to_json`` gives any section as JSON-ready values."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar


def child(doc: str, default: Any = dataclasses.MISSING, flatten: bool = False) -> Any:
    """A field that is not a column of the section's view: a child section or a derived value.
    ``flatten`` puts a child's fields at the parent's level in JSON (kept as they were in
    schema version 1)."""
    meta = {"doc": doc, "flatten": flatten}
    if default is dataclasses.MISSING:
        return field(metadata=meta)
    if isinstance(default, list):
        return field(default_factory=list, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass
class Section:
    """A row of a summary view."""

    VIEW: ClassVar[str] = ""
    LIMIT: ClassVar[int | None] = None  # rows kept (the view holds them all)

    @classmethod
    def columns(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls) if "doc" not in f.metadata]

    @classmethod
    def from_row(cls, row: dict[str, Any], **children: Any) -> Any:
        return cls(**row, **children)


@dataclass
class PerGpu(Section):
    """A row of one GPU's list in the summary: the view's device_id places it."""

    @classmethod
    def columns(cls) -> list[str]:
        return ["device_id", *super().columns()]


def to_json(obj: Any) -> Any:
    """A section as JSON-ready values: optional children that are None are left out, and
    flattened children are merged into their parent."""
    if isinstance(obj, list):
        return [to_json(x) for x in obj]
    if isinstance(obj, dict):
        return {k: to_json(v) for k, v in obj.items()}
    if not dataclasses.is_dataclass(obj):
        return obj
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if f.metadata.get("flatten"):
            out.update(to_json(value))
        elif value is not None or "doc" not in f.metadata:
            out[f.name] = to_json(value)
    return out
