"""The findings of a candidate against the baseline's: matched by rule and subject, resolved,
new, changed, unchanged, or hidden (gone from a candidate whose CUDA graphs were traced whole,
where a rule about the kernels inside them cannot see them)."""

from __future__ import annotations

import math

from nsight_doctor.compare.metrics import change
from nsight_doctor.compare.model import FindingChange, FindingsDiff, Profile
from nsight_doctor.compare.rows import kernel_key_name
from nsight_doctor.compare.warnings import graph_traced, has_timeline
from nsight_doctor.model import Diagnosis, Finding

# A finding whose impact (as a share of its window) moved less than this (relative %) is unchanged.
FINDING_CHANGE_PCT = 10.0
# Findings about the kernels themselves (their shapes, names, sequences): graph-level tracing
# hides them inside graph launches.
KERNEL_LEVEL_TAGS = {"memory-bound", "compute-bound", "attention", "kv-cache", "moe"}


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
    window = f.window_ns or d.summary.impact_window()[0]
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
                if not has_timeline(base.diagnosis) and not has_timeline(cand.diagnosis):
                    # Reports of other kernel sets: their shares are of different totals, the
                    # kernels' own time is what compares.
                    abs_ch = change(fb.impact_ns, fc.impact_ns) if fb.impact_ns else None
                    moved = moved or (abs_ch is not None and abs(abs_ch) >= FINDING_CHANGE_PCT)
                status = "changed" if moved else "unchanged"
                if ch == math.inf:
                    ch = None
            elif fb and hidden(fb, base, cand):
                ch, status = None, "hidden"
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
    order = {"new": 0, "resolved": 1, "hidden": 2, "changed": 3, "unchanged": 4}
    changes.sort(
        key=lambda x: (order[x.status], -max(x.baseline_impact_ns or 0, x.candidate_impact_ns or 0), x.rule_id)
    )
    return FindingsDiff(base.label, cand.label, changes)


def hidden(f: Finding, base: Profile, cand: Profile) -> bool:
    """A finding about kernels, gone from a candidate that traced its CUDA graphs whole (the
    baseline did not): the kernels moved out of sight, which is not a fix."""
    sb, sc = base.diagnosis.summary, cand.diagnosis.summary
    return graph_traced(sc) and not graph_traced(sb) and bool(KERNEL_LEVEL_TAGS & set(f.tags))
