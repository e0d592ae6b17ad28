"""The typed summary (sections/) is the summary views' rows: each section's fields are its
view's columns, and the JSON form matches the generated schema on real samples."""

from __future__ import annotations

import dataclasses
import re

import pytest

from conftest import sample
from nsight_doctor import sections, store
from nsight_doctor.sections import Section


def section_classes() -> list[type[Section]]:
    return [c for c in vars(sections).values() if isinstance(c, type) and issubclass(c, Section) and c.VIEW]


@pytest.fixture(scope="module")
def con():
    built = store.build([sample("decode_b1_gpumetrics")])
    c = built.connect()
    yield c
    c.close()
    built.close()


@pytest.mark.parametrize("cls", section_classes(), ids=lambda c: c.__name__)
def test_section_fields_are_its_view_columns(con, cls):
    sql = store.view_sql(cls.VIEW)
    macro = re.search(rf"CREATE MACRO {cls.VIEW}\((.*?)\) AS TABLE", sql)
    target = f"SELECT * FROM {cls.VIEW}({', '.join('NULL' for _ in macro.group(1).split(','))})" if macro else cls.VIEW
    columns = [r[0] for r in con.execute(f"DESCRIBE {target}").fetchall()]
    assert cls.columns() == columns


def test_every_summary_view_has_a_section():
    views = {n for n in store.documented_views() if n.startswith("summary_")}
    assert views == {c.VIEW for c in section_classes() if c.VIEW.startswith("summary_")}


def test_optional_sections_are_left_out_of_json_when_absent():
    from nsight_doctor import analyze

    d = analyze([sample("decode_b1")])
    j = d.summary.to_json()
    assert "ncu" not in j and "communication" not in j and "gpu_metrics" not in j
    assert j["capture_ns"] == d.summary.capture.capture_ns  # flattened section
    fields = {f.name for f in dataclasses.fields(sections.Summary)}
    assert "capture" in fields and "capture" not in j
