"""nsight-doctor rules: list, explain, test and document the rules."""

from __future__ import annotations

import json

import click

from nsight_doctor.cli.common import EXIT_FINDINGS, one_line, rules_option
from nsight_doctor.errors import DoctorError
from nsight_doctor.render.text import sanitize


@click.group()
def rules():
    """List, explain and test the rules."""


@rules.command("list")
@rules_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def rules_list(rules_dirs, fmt):
    """List every rule with its severity and tags.

    \b
    Example:
      nsight-doctor rules list
    """
    from nsight_doctor.rules import load_rules

    all_rules, warnings = load_rules(rules_dirs)
    if fmt == "json":
        click.echo(
            json.dumps(
                [
                    {
                        "id": r.id,
                        "name": r.name,
                        "severity": r.severity,
                        "tags": r.tags,
                        "requires": r.requires,
                        "thresholds": {n: {"default": t.default, "doc": t.doc} for n, t in r.thresholds.items()},
                    }
                    for r in all_rules
                ],
                indent=2,
            )
        )
        return 0
    width = max(len(r.id) for r in all_rules)
    for r in all_rules:
        click.echo(sanitize(f"{r.id.ljust(width)}  {r.severity:8s}  {r.name}  [{', '.join(r.tags)}]"))
    for w in warnings:
        click.echo(f"warning: {one_line(w)}", err=True)
    return 0


@rules.command("explain")
@click.argument("rule_id")
@rules_option
def rules_explain(rule_id, rules_dirs):
    """Explain a rule: what it detects, why it matters, its evidence, what to do.

    \b
    Example:
      nsight-doctor rules explain launch-bound
    """
    from nsight_doctor.docgen.rules import rule_page
    from nsight_doctor.rules import load_rules

    all_rules, _ = load_rules(rules_dirs)
    by_id = {r.id: r for r in all_rules}
    if rule_id not in by_id:
        raise DoctorError(f"no rule '{rule_id}' (see: nsight-doctor rules list)")
    page = rule_page(by_id[rule_id])
    if page.startswith("<!--"):  # the docs page's "generated" comment means nothing in a terminal
        page = page.split("\n", 1)[1].lstrip("\n")
    click.echo(sanitize(page), nl=False)  # a user rule's text is untrusted
    return 0


@rules.command("test")
@click.argument("rule_ids", nargs=-1)
@rules_option
def rules_test(rule_ids, rules_dirs):
    """Run the test cases beside each rule (<id>.test.yaml).

    \b
    Example:
      nsight-doctor rules test --rules my-rules/
    """
    from nsight_doctor.rule_tests import run_file
    from nsight_doctor.rules import load_rules

    all_rules, _ = load_rules(rules_dirs)
    chosen = [r for r in all_rules if not rule_ids or r.id in rule_ids]
    failed = 0
    for rule in chosen:
        if rule.test_path is None:
            click.echo(f"{rule.id}: no test file")
            failed += 1
            continue
        for result in run_file(rule, rule.test_path):
            status = "ok" if result.ok else "FAIL"
            click.echo(one_line(f"{rule.id}: {result.name}: {status}{' - ' + result.detail if result.detail else ''}"))
            failed += not result.ok
    return EXIT_FINDINGS if failed else 0


@rules.command("docs")
@click.argument("out_dir", type=click.Path(file_okay=False))
@rules_option
@click.option("--check", is_flag=True, help="Fail (exit 1) if the pages in OUT_DIR are not current.")
def rules_docs(out_dir, rules_dirs, check):
    """Write one Markdown page per rule into OUT_DIR (docs/rules in this repository).

    \b
    Example:
      nsight-doctor rules docs docs/rules --check
    """
    from nsight_doctor.docgen.rules import write_rule_pages
    from nsight_doctor.rules import load_rules

    all_rules, _ = load_rules(rules_dirs)
    stale = write_rule_pages(all_rules, out_dir, check=check)
    if check and stale:
        click.echo("out of date: " + ", ".join(stale) + " (run: nsight-doctor rules docs " + out_dir + ")", err=True)
        return EXIT_FINDINGS
    return 0
