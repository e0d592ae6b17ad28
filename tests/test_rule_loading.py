"""The engine validates rule files: schema, unique ids, read-only SQL, known parameters."""

from __future__ import annotations

import textwrap

import pytest

from nsight_doctor.errors import RuleError
from nsight_doctor.rule_tests import run_case
from nsight_doctor.rules import load_rules, select_rules, with_overrides

GOOD = textwrap.dedent("""\
    id: my-rule
    name: My rule
    title: "{n:int} kernels"
    severity: low
    tags: [launch-bound]
    requires: [kernels]
    thresholds:
      min_n: {default: 1, doc: Fire at this many kernels.}
    query: SELECT count(*) AS n, 0 AS impact_ns FROM kernels HAVING count(*) >= $min_n
    message: "{n} kernels"
    recommendation: Do less.
    impact: Zero, this is a test rule.
    explanation: {what: w, why: w, evidence: e, action: a}
    """)


def write(folder, name, text):
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text)


def test_user_rule_loads_and_missing_test_file_is_a_warning(tmp_path):
    write(tmp_path, "my-rule.yaml", GOOD)
    rules, warnings = load_rules([tmp_path])
    assert "my-rule" in [r.id for r in rules]
    assert any("no test file" in w for w in warnings)


@pytest.mark.parametrize(
    "change,message",
    [
        (("severity: low", "severity: urgent"), "severity"),
        (("tags: [launch-bound]", "tags: [speed]"), "tags"),
        (("query: SELECT", "query: DELETE FROM kernels; SELECT"), "exactly one SELECT"),
        (("$min_n", "$other"), "not a threshold"),
        (("id: my-rule", "id: My_Rule"), "id"),
        (("impact: Zero, this is a test rule.\n", ""), "impact"),
    ],
)
def test_invalid_rules_are_rejected(tmp_path, change, message):
    write(tmp_path, "my-rule.yaml", GOOD.replace(*change))
    with pytest.raises(RuleError, match=message):
        load_rules([tmp_path])


def test_duplicate_ids_are_rejected(tmp_path):
    write(tmp_path, "launch-bound.yaml", GOOD.replace("id: my-rule", "id: launch-bound"))
    with pytest.raises(RuleError, match="duplicate rule id 'launch-bound'"):
        load_rules([tmp_path])


def test_file_must_be_named_after_the_id(tmp_path):
    write(tmp_path, "other.yaml", GOOD)
    with pytest.raises(RuleError, match="named after the rule id"):
        load_rules([tmp_path])


def test_select_and_ignore_by_id_and_tag():
    rules, _ = load_rules()
    assert {r.id for r in select_rules(rules, ["launch-bound"])} == {"launch-bound"}
    tagged = select_rules(rules, ["profile-health"])
    assert tagged and all("profile-health" in r.tags for r in tagged)
    assert "host-sync" not in {r.id for r in select_rules(rules, [], ["host-sync"])}
    with pytest.raises(RuleError, match="unknown rule id or tag"):
        select_rules(rules, ["no-such-rule"])


def test_threshold_overrides_are_checked_and_typed():
    rules, _ = load_rules()
    changed = with_overrides(rules, {"launch-bound.min_launch_idle_pct": "25"})
    lb = next(r for r in changed if r.id == "launch-bound")
    assert lb.thresholds["min_launch_idle_pct"].effective == 25
    # The loaded rules are not changed: overrides never leak into another analysis.
    original = next(r for r in rules if r.id == "launch-bound")
    assert original.thresholds["min_launch_idle_pct"].effective == 10
    with pytest.raises(RuleError, match="has no threshold 'nope'"):
        with_overrides(rules, {"launch-bound.nope": "1"})
    with pytest.raises(RuleError, match="no rule 'nope'"):
        with_overrides(rules, {"nope.x": "1"})
    with pytest.raises(RuleError, match="expected a whole number"):
        with_overrides(rules, {"launch-bound.min_launch_idle_pct": "many"})


def test_an_xfail_case_passes_when_it_misses_and_fails_when_it_passes():
    rules, _ = load_rules()
    lb = next(r for r in rules if r.id == "launch-bound")
    quiet_store = {"kernels": [{"start": 0, "end": 1000, "name": "k"}]}
    miss = run_case(lb, {"name": "miss", "expect": "fire", "xfail": "known", "tables": quiet_store})
    assert miss.ok and "known miss" in miss.detail
    hit = run_case(lb, {"name": "hit", "expect": "quiet", "xfail": "known", "tables": quiet_store})
    assert not hit.ok and "marked xfail" in hit.detail
