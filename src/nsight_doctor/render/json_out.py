"""The JSON report: stable and versioned; docs/json.md documents it."""

from __future__ import annotations

import json
from typing import Any

from nsight_doctor.model import Diagnosis

SCHEMA_VERSION = 1


def to_dict(d: Diagnosis) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": d.tool,
        "command": d.command,
        "inputs": [
            {"path": i["path"], "kind": i["kind"], "producer": i["producer"],
             "producer_version": i["producer_version"], "export_path": i.get("export_path"),
             "export_schema_version": i.get("export_schema_version")}
            for i in d.inputs
        ],
        "summary": d.summary,
        "findings": [
            {"rank": n, "rule_id": f.rule_id, "title": f.title, "severity": f.severity,
             "tags": f.tags, "impact_ns": f.impact_ns, "message": f.message,
             "recommendation": f.recommendation, "evidence": f.evidence,
             "references": f.references}
            for n, f in enumerate(d.findings, 1)
        ],
        "skipped_rules": [{"rule_id": s.rule_id, "reason": s.reason} for s in d.skipped],
        "notes": d.notes,
    }


def render(d: Diagnosis) -> str:
    return json.dumps(to_dict(d), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
