"""The JSON Schema of the summary's sections (sections/), from their type hints: the
schemas of the JSON report and of compare's JSON are built from it."""

from __future__ import annotations

import dataclasses
import types
from typing import Any, Union, get_args, get_origin, get_type_hints

from nsight_doctor.sections import Summary


def json_schema(cls: type = Summary) -> dict[str, Any]:
    """The JSON Schema of a section's to_json form, from its type hints."""
    hints = get_type_hints(cls)
    props: dict[str, Any] = {}
    required: list[str] = []
    for f in dataclasses.fields(cls):
        if f.metadata.get("flatten"):
            sub = json_schema(hints[f.name])
            props.update(sub["properties"])
            required += sub["required"]
            continue
        props[f.name] = type_schema(hints[f.name])
        optional_child = "doc" in f.metadata and f.default is None
        if not optional_child:
            required.append(f.name)
    return {"type": "object", "required": required, "properties": props}


def type_schema(tp: Any) -> dict[str, Any]:
    origin, args = get_origin(tp), get_args(tp)
    if origin in (Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        schema = type_schema(inner[0])
        if "type" in schema and isinstance(schema["type"], str):
            return {**schema, "type": [schema["type"], "null"]}
        return {"anyOf": [schema, {"type": "null"}]}
    if origin is list:
        return {"type": "array", "items": type_schema(args[0])}
    if origin is dict:
        return {"type": "object", "additionalProperties": type_schema(args[1])}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return json_schema(tp)
    return {"type": {int: "integer", float: "number", str: "string", bool: "boolean"}[tp]}
