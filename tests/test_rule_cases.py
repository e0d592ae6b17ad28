"""Every built-in rule runs its own test file (rules/<id>.test.yaml): positive, negative and
threshold-override cases on stores built from rows by the real views and engine."""

from __future__ import annotations

import pytest
import yaml

from nsight_doctor.rule_tests import load_cases, run_case
from nsight_doctor.rules import builtin_rules_dir, load_rules

RULES, _ = load_rules()


def cases():
    for rule in RULES:
        assert rule.test_path is not None
        data = load_cases(rule.test_path)
        for case in data["cases"]:
            yield pytest.param(rule, case, id=f"{rule.id}::{case['name']}")


@pytest.mark.parametrize("rule,case", list(cases()))
def test_rule_case(rule, case):
    """The same check as `nsight-doctor rules test` (an xfail case passes when it misses)."""
    result = run_case(rule, case)
    assert result.ok, result.detail


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_rule_has_positive_negative_and_threshold_cases(rule):
    data = yaml.safe_load(rule.test_path.read_text())
    expects = [c["expect"] for c in data["cases"]]
    assert "fire" in expects, "no case where the rule must fire"
    assert "quiet" in expects, "no case where the rule must stay quiet"
    if rule.thresholds:
        assert any(c.get("thresholds") for c in data["cases"]), "no threshold-override case"


def test_builtin_rules_live_in_the_repository_rules_folder():
    assert builtin_rules_dir().name in ("rules", "builtin_rules")
    assert len(RULES) >= 10
