"""Renderers: snapshots of a full diagnosis of a real sample in every format, and hostile
kernel names and NVTX text that must come out inert.

Update the snapshots after an intended change with: UPDATE_SNAPSHOTS=1 pytest tests/test_render.py
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from conftest import REPO, run_cli, sample
from nsight_doctor import analyze
from nsight_doctor.render import render

SNAPSHOTS = Path(__file__).parent / "snapshots"
REL = "samples/decode_b1/decode_b1.sqlite"
HOSTILE = "<img src=x onerror=alert(1)>|](javascript:alert(1))`**bold**`\x1b[31m"


def check_snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / name
    if os.environ.get("UPDATE_SNAPSHOTS") or not path.exists():
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(text)
        if not os.environ.get("UPDATE_SNAPSHOTS"):
            pytest.fail(f"wrote a new snapshot {path}; check it and commit it")
    assert text == path.read_text(), f"{name} changed; if intended, rerun with UPDATE_SNAPSHOTS=1"


@pytest.mark.parametrize("fmt,ext", [("text", "txt"), ("markdown", "md")])
def test_snapshot(fmt, ext):
    r = run_cli("analyze", REL, "--format", fmt, cwd=REPO)
    assert r.returncode == 0, r.stderr
    check_snapshot(f"decode_b1.{ext}", r.stdout)


def close(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return (
            isinstance(a, (int, float))
            and isinstance(b, (int, float))
            and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
        )
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    return a == b


def test_json_snapshot():
    r = run_cli("analyze", REL, "--format", "json", cwd=REPO)
    assert r.returncode == 0, r.stderr
    path = SNAPSHOTS / "decode_b1.json"
    if os.environ.get("UPDATE_SNAPSHOTS") or not path.exists():
        check_snapshot("decode_b1.json", r.stdout)
        return
    assert close(json.loads(r.stdout), json.loads(path.read_text())), (
        "decode_b1.json changed; if intended, rerun with UPDATE_SNAPSHOTS=1"
    )


@pytest.fixture(scope="module")
def hostile_diagnosis(tmp_path_factory):
    """A real export whose hottest kernel name and NVTX range text were replaced by markup."""
    p = tmp_path_factory.mktemp("hostile") / "hostile.sqlite"
    shutil.copy(sample("decode_b1"), p)
    con = sqlite3.connect(p)
    kid = con.execute("""SELECT shortName FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY shortName
                         ORDER BY count(*) DESC LIMIT 1""").fetchone()[0]
    con.execute("UPDATE StringIds SET value = ? WHERE id = ?", (HOSTILE, kid))
    con.execute("UPDATE NVTX_EVENTS SET text = ? WHERE text = 'decode_step'", (HOSTILE,))
    con.commit()
    con.close()
    return analyze([p])


def test_markdown_escapes_untrusted_names(hostile_diagnosis):
    md = render(hostile_diagnosis, "markdown")
    assert HOSTILE not in md
    assert "<img" not in md and "&lt;img src=x onerror=alert(1)&gt;" in md
    assert not re.search(r"(?<!\\)\]\(javascript:", md)  # only the inert \]( form remains
    assert "\x1b" not in md
    # Every summary row still has exactly two cells: no | leaked from a name.
    table = md.split("| Metric | Value |")[1].split("\n\n")[0].strip().splitlines()[1:]
    assert table and all(len(re.findall(r"(?<!\\)\|", line)) == 3 for line in table)


def test_text_drops_terminal_escapes(hostile_diagnosis):
    txt = render(hostile_diagnosis, "text")
    assert "\x1b" not in txt
    assert "<img src=x" in txt  # plain text shows the name as it is, minus control characters


def test_json_keeps_names_verbatim(hostile_diagnosis):
    d = json.loads(render(hostile_diagnosis, "json"))
    names = [k["name"] for k in d["summary"]["top_kernels"]]
    assert HOSTILE in names


@pytest.mark.parametrize(
    "template,values,shown",
    [
        ("{n:int copy/copies}", {"n": 1}, "1 copy"),
        ("{n:int copy/copies}", {"n": 1.2}, "1 copy"),
        ("{n:int copy/copies}", {"n": 2}, "2 copies"),
        ("{n:int gap/gaps}", {"n": 12345}, "12,345 gaps"),
        ("{n:int gap/gaps}", {"n": None}, "n/a"),
    ],
)
def test_counts_take_their_noun_in_the_right_number(template, values, shown):
    from nsight_doctor.model import fill

    assert fill(template, values) == shown


def test_no_rule_says_one_of_a_plural():
    """A count that can be 1 takes {x:int noun/nouns} in every rule's text ("1 copies" was seen)."""
    plural = re.compile(r"\{[a-z_]+:int\} (copies|gaps|kernels|times|collectives|transfers|cases)\b")
    for path in sorted((REPO / "rules").glob("*.yaml")):
        if not path.name.endswith(".test.yaml"):
            assert not plural.search(path.read_text()), path.name
