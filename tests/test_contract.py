"""The base-table contract (ingest/base_tables.yaml) and the column maps that fill it: every
map covers every column of every table it fills, and the views read neutral columns only."""

from __future__ import annotations

import re

import pytest

from nsight_doctor.ingest.tables import column_map, contract
from nsight_doctor.store import view_files

MAPS = ["nsys_columns.yaml", "nvprof_columns.yaml", "ncu_columns.yaml"]


def sources(spec: dict) -> list[dict]:
    return spec.get("union") or spec.get("sources") or [spec]


@pytest.mark.parametrize("map_name", MAPS)
def test_every_map_covers_every_column_of_the_tables_it_fills(map_name):
    cmap = column_map(map_name)
    for table, spec in cmap["tables"].items():
        assert table in contract(), f"{map_name}: {table} is not in base_tables.yaml"
        declared = contract()[table].column_names
        for source in sources(spec):
            if "sql" in source:
                continue  # raw SQL: its shape is checked when it runs (tables.check_shape)
            assert list(source["columns"]) == declared, f"{map_name}: {table} ({source.get('table')})"
            for column, col in source["columns"].items():
                if isinstance(col, dict) and "decode" in col:
                    assert col["decode"] in cmap["decoders"], f"{map_name}: {table}.{column}"


def test_every_base_table_is_filled_by_some_source():
    filled = {t for m in MAPS for t in column_map(m)["tables"]}
    # Filled by code: the ncu reader's own tables and nvprof's capture and process rows.
    by_code = {"base_ncu_reports", "base_ncu_rules", "base_ncu_metrics"}
    assert set(contract()) - filled <= by_code


def test_views_read_no_profiler_encodings():
    """Decoding happens in ingest: no nsys global-id arithmetic or enum codes in the views."""
    for name, sql in view_files().items():
        code = "\n".join(line.split("--", 1)[0] for line in sql.splitlines())
        assert ">> 24" not in code and "16777215" not in code, name
        assert not re.search(r"event_type|copy_kind|global_pid|global_tid|type_id\b", code), name
        assert not re.search(r"\b[a-z]+__[a-z_]+\.", code), f"{name} names an ncu metric"


def test_contract_types_are_duckdb_types():
    for table in contract().values():
        for c in table.columns:
            assert c.type in {"BIGINT", "INTEGER", "DOUBLE", "VARCHAR", "BOOLEAN"}, f"{table.name}.{c.name}"
            assert c.doc, f"{table.name}.{c.name} has no doc"
