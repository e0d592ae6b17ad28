"""Docs stay true to the code: generated pages are current, the schema page matches the
views, the JSON output matches its schema, and every command is documented."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest

from conftest import REPO, run_cli, sample
from nsight_doctor import store
from nsight_doctor.docgen import pages as docgen
from nsight_doctor.model import TAGS
from nsight_doctor.store.docs import view_docs


def test_generated_docs_are_current():
    assert docgen.main(["--check"]) == 0, "run: python -m nsight_doctor.docgen"


def test_schema_md_documents_every_view_column():
    built = store.build([sample("decode_b1_graphs")])
    try:
        con = built.connect()
        for name, _, cols in view_docs():
            macro = re.search(rf"CREATE MACRO {name}\((.*?)\) AS TABLE", store.view_sql(name))
            args = ", ".join("NULL" for _ in macro.group(1).split(",")) if macro else None
            target = f"SELECT * FROM {name}({args})" if macro else name
            actual = [r[0] for r in con.execute(f"DESCRIBE {target}").fetchall()]
            assert [c for c, _ in cols] == actual, name
    finally:
        built.close()


@pytest.mark.parametrize(
    "name", ["decode_b1", pytest.param("decode_b1_gpumetrics", marks=pytest.mark.slow), "decode_b1_graphs"]
)
def test_json_output_matches_its_schema(name):
    schema = json.loads((REPO / "src/nsight_doctor/render/report_schema.json").read_text())
    r = run_cli("analyze", str(sample(name)), "--format", "json")
    jsonschema.validate(json.loads(r.stdout), schema)


def test_every_summary_key_is_in_json_md():
    doc = (REPO / "docs/json.md").read_text()
    r = run_cli("analyze", str(sample("decode_b1_gpumetrics")), "--format", "json")
    for key in json.loads(r.stdout)["summary"]:
        assert f"`{key}`" in doc, key


def test_tags_doc_lists_the_vocabulary():
    doc = (REPO / "docs/tags.md").read_text()
    assert re.findall(r"^\| `([a-z-]+)` \|", doc, re.M) == list(TAGS)


def test_readme_and_ci_run_the_same_test_command():
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)\n```", readme, re.S)
    assert "nsight-doctor analyze samples/" in blocks[0]
    test_cmd = blocks[1].strip()
    assert "pytest" in test_cmd
    assert test_cmd in (REPO / ".ci/run").read_text()


def test_every_cli_option_is_documented():
    doc = (REPO / "docs/quickstart.md").read_text()
    r = run_cli("analyze", "--help")
    for opt in re.findall(r"^\s+(?:-\w, )?(--[a-z-]+)", r.stdout, re.M):
        if opt != "--help":
            assert opt in doc, opt
