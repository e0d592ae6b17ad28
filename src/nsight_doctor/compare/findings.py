"""The findings of a candidate against the baseline's: matched by rule and subject, resolved,
new, changed or unchanged."""

from __future__ import annotations

import math

from nsight_doctor.compare.metrics import change
from nsight_doctor.compare.model import FindingChange, FindingsDiff, Profile
from nsight_doctor.compare.rows import kernel_key_name
from nsight_doctor.model import Diagnosis, Finding

# A finding whose impact (as a share of its window) moved less than this (relative %) is unchanged.
FINDING_CHANGE_PCT = 10.0


def subject(f: Finding) -> str:
    if f.claims:
        return ", ".join(sorted({kernel_key_name(c) for c in f.claims}))
    dev = f.evidence.get("device_id")
    if isinstance(dev, int) and not isinstance(dev, bool):
        return f"GPU {dev}"
    return "the capture"


def share(f: Finding, d: Diagnosis) -> float | None:
    if f.scope == "capture":
        return None
    steady = d.summary.steady_state
    window = f.window_ns or (steady.window_ns if steady else d.summary.capture.gpu_window_ns)
    return 100.0 * f.impact_ns / window if window else None


def findings_diff(base: Profile, cand: Profile) -> FindingsDiff:
    def keyed(d: Diagnosis) -> dict[tuple[str, str], list[Finding]]:
        out: dict[tuple[str, str], list[Finding]] = {}
        for f in d.findings:
            out.setdefault((f.rule_id, subject(f)), []).append(f)
        return out

    b, c = keyed(base.diagnosis), keyed(cand.diagnosis)
    changes = []
    for key in [*b, *(k for k in c if k not in b)]:
        bs, cs = b.get(key, []), c.get(key, [])
        for i in range(max(len(bs), len(cs))):
            fb = bs[i] if i < len(bs) else None
            fc = cs[i] if i < len(cs) else None
            sb = share(fb, base.diagnosis) if fb else None
            sc = share(fc, cand.diagnosis) if fc else None
            if fb and fc:
                ch = change(sb, sc) if sb else (None if not sc else math.inf)
                moved = ch is not None and abs(ch) >= FINDING_CHANGE_PCT and abs((sc or 0) - (sb or 0)) >= 0.5
                status = "changed" if moved else "unchanged"
                if ch == math.inf:
                    ch = None
            else:
                ch, status = None, "resolved" if fb else "new"
            f = fc or fb
            assert f is not None
            changes.append(
                FindingChange(
                    rule_id=key[0],
                    subject=key[1],
                    status=status,
                    title=f.title,
                    severity=f.severity,
                    baseline_impact_ns=fb.impact_ns if fb else None,
                    candidate_impact_ns=fc.impact_ns if fc else None,
                    baseline_share_pct=sb,
                    candidate_share_pct=sc,
                    change_pct=ch,
                )
            )
    order = {"new": 0, "resolved": 1, "changed": 2, "unchanged": 3}
    changes.sort(
        key=lambda x: (order[x.status], -max(x.baseline_impact_ns or 0, x.candidate_impact_ns or 0), x.rule_id)
    )
    return FindingsDiff(base.label, cand.label, changes)
