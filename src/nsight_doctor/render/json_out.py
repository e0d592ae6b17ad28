"""The JSON report: stable and versioned; docs/json.md documents it."""

from __future__ import annotations

import json
from typing import Any

from nsight_doctor.model import SCOPES, SEVERITIES, TAGS, Diagnosis
from nsight_doctor.render.json_schema import json_schema

SCHEMA_VERSION = 2
INPUT_KINDS = ["nsys-rep", "nsys-sqlite", "nsys-parquet", "ncu-rep", "nvprof"]


def to_dict(d: Diagnosis) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": d.tool,
        "command": d.command,
        "inputs": [
            {
                "path": i["path"],
                "kind": i["kind"],
                "producer": i["producer"],
                "producer_version": i["producer_version"],
                "export_path": i.get("export_path"),
                "export_schema_version": i.get("export_schema_version"),
            }
            for i in d.inputs
        ],
        "summary": d.summary.to_json(),
        "findings": [
            {
                "rank": n,
                "rule_id": f.rule_id,
                "title": f.title,
                "severity": f.severity,
                "tags": f.tags,
                "scope": f.scope,
                "impact_ns": f.impact_ns,
                "window_ns": f.window_ns,
                "overlaps": f.overlaps,
                "message": f.message,
                "recommendation": f.recommendation,
                "evidence": f.evidence,
                "references": f.references,
                "sql": f.queries,
            }
            for n, f in enumerate(d.findings, 1)
        ],
        "skipped_rules": [{"rule_id": s.rule_id, "reason": s.reason} for s in d.skipped],
        "notes": d.notes,
    }


def render(d: Diagnosis) -> str:
    return json.dumps(to_dict(d), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def report_schema() -> dict[str, Any]:
    """The JSON Schema of this output (render/report_schema.json is generated from it)."""
    nullable = {"type": ["string", "null"]}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"nsight-doctor report, schema_version {SCHEMA_VERSION}",
        "type": "object",
        "required": ["schema_version", "tool", "command", "inputs", "summary", "findings", "skipped_rules", "notes"],
        "properties": {
            "schema_version": {"const": SCHEMA_VERSION},
            "tool": {
                "type": "object",
                "required": ["name", "version"],
                "properties": {"name": {"const": "nsight-doctor"}, "version": {"type": "string"}},
            },
            "command": {"type": "string"},
            "inputs": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "required": ["path", "kind", "producer", "producer_version"],
                    "properties": {
                        "path": {"type": "string"},
                        "kind": {"enum": INPUT_KINDS},
                        "producer": {"type": "string"},
                        "producer_version": nullable,
                        "export_path": nullable,
                        "export_schema_version": nullable,
                    },
                },
            },
            "summary": json_schema(),
            "findings": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": [
                        "rank",
                        "rule_id",
                        "scope",
                        "title",
                        "severity",
                        "tags",
                        "impact_ns",
                        "message",
                        "recommendation",
                        "evidence",
                        "references",
                        "sql",
                    ],
                    "properties": {
                        "rank": {"type": "integer", "minimum": 1},
                        "rule_id": {"type": "string"},
                        "title": {"type": "string"},
                        "severity": {"enum": SEVERITIES},
                        "tags": {"type": "array", "items": {"enum": list(TAGS)}},
                        "scope": {"enum": list(SCOPES)},
                        "impact_ns": {"type": "integer", "minimum": 0},
                        "window_ns": {"type": ["integer", "null"], "minimum": 0},
                        "overlaps": {"type": "array", "items": {"type": "integer", "minimum": 1}},
                        "message": {"type": "string"},
                        "recommendation": {"type": "string"},
                        "evidence": {"type": "object"},
                        "references": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "required": ["title", "url"],
                                "properties": {"title": {"type": "string"}, "url": {"type": "string"}},
                            },
                        },
                        "sql": {
                            "type": "object",
                            "description": "the SQL that produced the evidence, runnable against the --db store",
                            "required": ["query"],
                            "additionalProperties": {"type": "string"},
                        },
                    },
                },
            },
            "skipped_rules": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["rule_id", "reason"],
                    "properties": {"rule_id": {"type": "string"}, "reason": {"type": "string"}},
                },
            },
            "notes": {"type": "array", "items": {"type": "string"}},
        },
    }
