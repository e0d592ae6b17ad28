"""The reports people look at: HTML opened in a real headless Chromium with the network cut off,
the notebook validated and executed, the PDF read back with poppler, chart images, and hostile
kernel names and NVTX text that must stay inert everywhere.

Screenshots and reports are kept under the test's temporary folder, and copied to
$NSIGHT_DOCTOR_ARTIFACTS when it is set.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import sqlite3
import subprocess
from pathlib import Path

import duckdb
import pytest

from browser import Browser, keep_artifact, requires_chromium
from conftest import REPO, SAMPLES, run_cli, sample, unxz
from nsight_doctor import AnalyzeOptions, analyze
from nsight_doctor.db import plain
from nsight_doctor.render import charts as charts_mod
from nsight_doctor.render import html as html_mod
from nsight_doctor.render import notebook as notebook_mod
from nsight_doctor.report_data import METRIC_SERIES
from nsight_doctor.store.taxonomy import CATEGORY_IDS

SNAPSHOTS = Path(__file__).parent / "snapshots"
HOSTILE_NVTX = (
    "<script>window.__pwned=1</script><img src=x onerror=window.__pwned=2>"
    "[click me](javascript:alert(1)) | a | table ` tick ``` fence " + "very long text " * 40
)
HOSTILE_KERNEL = "<img src=x onerror=window.__pwned=3>|](javascript:alert(1))`**bold**`"
MAX_HTML_BYTES = 3_000_000
requires_poppler = pytest.mark.skipif(
    shutil.which("pdftotext") is None, reason="poppler is not installed (Debian package poppler-utils)"
)


def hostile_sample(folder: Path) -> Path:
    """A real export whose busiest kernel name and step NVTX text were replaced by markup."""
    p = folder / "hostile.sqlite"
    shutil.copy(sample("decode_b1"), p)
    con = sqlite3.connect(p)
    kid = con.execute(
        "SELECT shortName FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY shortName ORDER BY sum(end - start) DESC LIMIT 1"
    ).fetchone()[0]
    con.execute("UPDATE StringIds SET value = ? WHERE id = ?", (HOSTILE_KERNEL, kid))
    con.execute("UPDATE NVTX_EVENTS SET text = ? WHERE text = 'decode_step'", (HOSTILE_NVTX,))
    con.commit()
    con.close()
    return p


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """name -> (diagnosis, charts, html path, store path) for samples that cover every chart."""
    out = tmp_path_factory.mktemp("reports")
    cases = {
        "decode_b1_gpumetrics": [sample("decode_b1_gpumetrics")],
        "hf_cb_graphs": [sample("hf_cb_graphs")],
        "decode_b512_ncu": [sample("decode_b512"), SAMPLES / "ncu" / "ncu_decode_b512_full.ncu-rep.xz"],
        "hostile": [hostile_sample(out)],
    }
    made = {}
    for name, inputs in cases.items():
        store = out / f"{name}.duckdb"
        d = analyze(inputs, AnalyzeOptions(report_data=True, db=str(store)))
        charts = charts_mod.build(d)
        page = out / f"{name}.html"
        page.write_text(html_mod.render(d, charts=charts), encoding="utf-8")
        made[name] = (d, charts, page, store)
    return made


def test_every_kernel_category_has_a_colour():
    assert set(CATEGORY_IDS) <= set(charts_mod.CATEGORY_COLORS)


@pytest.mark.slow
def test_charts_follow_the_data(reports):
    ids = {name: [c.id for c in charts] for name, (_, charts, _, _) in reports.items()}
    common = ["gpu-utilisation", "timeline", "kernel-categories", "top-kernels", "idle-gaps"]
    for name in ids:
        assert set(common) <= set(ids[name]), name
    assert {"ncu-stalls", "ncu-occupancy", "ncu-roofline", "ncu-throughput"} <= set(ids["decode_b512_ncu"])
    assert not any(i.startswith("ncu-") for i in ids["hf_cb_graphs"])
    assert "step-times" in ids["decode_b1_gpumetrics"] and "step-times" not in ids["hf_cb_graphs"]
    # Sampled GPU metrics are drawn with the busy time; a trace without them has busy time only.
    series = {name: {r["series"] for r in d.datasets["utilisation"].rows} for name, (d, _, _, _) in reports.items()}
    assert "SMs active (sampled)" in series["decode_b1_gpumetrics"]
    assert series["hf_cb_graphs"] == {"busy (traced operations)"}
    # The timeline window: the median NVTX step when the loop is marked, else the middle of the run.
    assert "NVTX range of median length" in reports["decode_b1_gpumetrics"][0].datasets["timeline"].note
    assert "no repeated NVTX range" in reports["hf_cb_graphs"][0].datasets["timeline"].note


@pytest.mark.slow
def test_html_is_one_small_offline_file(reports):
    for name, (_, charts, page, _) in reports.items():
        text = page.read_text()
        assert page.stat().st_size < MAX_HTML_BYTES, name
        markup = re.sub(r"(<script\b[^>]*>).*?</script>", r"\1</script>", text, flags=re.S)
        assert not re.search(r"<(script|img|iframe|embed|object)[^>]*\ssrc=", markup, re.I), name
        assert not re.search(r"<link[^>]*\shref=", markup, re.I), name
        assert not re.search(r"@import|url\(\s*['\"]?https?:", markup, re.I), name
        assert text.count("data-chart=") == len(charts)
    d, _, page, _ = reports["decode_b512_ncu"]
    text = page.read_text()
    for rank, f in enumerate(d.findings, 1):
        assert f'id="{html_mod.anchor(rank, f)}"' in text


def same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return a == b


@pytest.mark.slow
def test_chart_data_sql_gives_the_same_rows(reports):
    for name, (d, _, _, store) in reports.items():
        con = duckdb.connect(str(store), read_only=True)
        for key, ds in d.datasets.items():
            cur = con.execute(ds.sql)
            cols = [c[0] for c in cur.description]
            got = [dict(zip(cols, map(plain, r))) for r in cur.fetchall()]
            if key == "utilisation":  # report_data names the metric series after the query
                for r in got:
                    r["series"] = METRIC_SERIES.get(r["series"], r["series"])
            assert len(got) == len(ds.rows), f"{name}.{key}"
            assert all(g.keys() == e.keys() and all(same(g[k], e[k]) for k in e) for g, e in zip(got, ds.rows)), (
                f"{name}.{key}"
            )
        con.close()


@pytest.fixture(scope="module")
def browser():
    b = Browser()
    yield b
    b.close()


ALL_DRAWN = (
    "document.querySelectorAll('.vis[data-rendered]').length === document.querySelectorAll('script[data-chart]').length"
)


@requires_chromium
@pytest.mark.parametrize("name", ["decode_b1_gpumetrics", "hf_cb_graphs", "decode_b512_ncu", "hostile"])
@pytest.mark.browser
def test_html_in_chromium(reports, browser, name, tmp_path):
    _, charts, page, _ = reports[name]
    browser.open(page, ALL_DRAWN)
    assert browser.errors() == []
    state = browser.evaluate(
        """Array.from(document.querySelectorAll('.vis')).map(v => ({
             id: v.id, rendered: v.getAttribute('data-rendered'),
             marks: v.querySelectorAll('svg .mark-rect path, svg .mark-area path, svg .mark-line path, '
                                      + 'svg .mark-symbol path, svg .mark-tick path, svg .mark-rule line').length}))"""
    )
    assert [s["id"] for s in state] == [f"vis-{c.id}" for c in charts]
    for s in state:
        assert s["rendered"] == "true" and s["marks"] > 0, s
    # Nothing but the file itself (and inline data) was loaded.
    assert all(u.startswith(("file:", "data:", "about:")) for u in browser.requests()), browser.requests()
    shot = tmp_path / f"report-{name}.png"
    browser.screenshot(shot)
    assert shot.stat().st_size > 50_000
    keep_artifact(shot)
    keep_artifact(page)


@requires_chromium
@pytest.mark.browser
def test_hostile_names_stay_text_in_chromium(reports, browser):
    _, _, page, _ = reports["hostile"]
    browser.open(page, ALL_DRAWN)
    assert browser.evaluate("typeof window.__pwned") == "undefined"
    assert browser.evaluate("document.querySelectorAll('img[src=\"x\"], svg script, svg foreignObject').length") == 0
    # The names are on the page as text: in the findings, the summary and the charts' labels.
    assert browser.evaluate("document.body.innerText.includes('<img src=x onerror=window.__pwned=3>')")
    labels = browser.evaluate(
        "Array.from(document.querySelectorAll('#vis-top-kernels svg text')).map(t => t.textContent)"
    )
    assert any("<img src=x" in t for t in labels)
    # Hovering the hostile kernel's bar shows its name, escaped, in vega-tooltip's box.
    browser.call(
        "Runtime.evaluate", expression="document.querySelector('#vis-top-kernels').scrollIntoView({block: 'center'})"
    )
    box = browser.evaluate(
        """(() => { const r = document.querySelector('#vis-top-kernels .mark-rect path').getBoundingClientRect();
                    return [r.x + r.width / 2, r.y + r.height / 2]; })()"""
    )
    browser.mouse_move(box[0], box[1])
    tip = browser.evaluate(
        "(() => { const t = document.getElementById('vg-tooltip-element'); "
        "return t ? [t.textContent, t.querySelectorAll('img, script').length] : null; })()"
    )
    assert tip is not None and "<img src=x" in tip[0] and tip[1] == 0, tip
    assert browser.evaluate("typeof window.__pwned") == "undefined"
    assert browser.errors() == []


@pytest.mark.slow
def test_hostile_names_are_escaped_in_the_files(reports, tmp_path):
    d, charts, page, _ = reports["hostile"]
    text = page.read_text()
    body = re.sub(r"<script\b[^>]*>.*?</script>", "", text, flags=re.S)
    assert "<img src=x" not in body and "<script>window" not in body
    assert "&lt;img src=x onerror=window.__pwned=3&gt;" in body
    for script in re.findall(r'<script type="application/json"[^>]*>(.*?)</script>', text, re.S):
        assert "<" not in script and ">" not in script
        json.loads(script)  # still the same JSON
    # The notebook's markdown cells escape the names; its code cells hold SQL, not names.
    named = [c for c in charts if c.id in ("top-kernels", "timeline")]  # the charts that show the names
    nb = json.loads(notebook_mod.render(d, charts=named))
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            src = cell["source"]
            assert "<img src=x" not in src and "<script>" not in src
            assert not re.search(r"(?<!\\)\]\(javascript:", src)
    # Chart images draw the names as SVG text.
    written = charts_mod.export(named, tmp_path / "charts")
    for svg in (p for p in written if p.suffix == ".svg"):
        content = svg.read_text()
        assert "<script" not in content and "<img" not in content and "onerror=window" in content


def strip_volatile(page: str) -> str:
    """The HTML without its style sheet, the Vega scripts and the chart specs (they change with
    Altair and vl-convert)."""
    page = re.sub(r"<style>.*?</style>", "<style>(report.css)</style>", page, count=1, flags=re.S)
    page = re.sub(r"<script>.*?</script>", "<script>(Vega, Vega-Lite, vega-embed)</script>", page, count=1, flags=re.S)
    return re.sub(
        r'(<script type="application/json" data-chart="[^"]+">).*?(</script>)', r"\1(spec)\2", page, flags=re.S
    )


def check_snapshot(name: str, text: str) -> None:
    import os

    path = SNAPSHOTS / name
    if os.environ.get("UPDATE_SNAPSHOTS") or not path.exists():
        path.write_text(text)
        if not os.environ.get("UPDATE_SNAPSHOTS"):
            pytest.fail(f"wrote a new snapshot {path}; check it and commit it")
    assert text == path.read_text(), f"{name} changed; if intended, rerun with UPDATE_SNAPSHOTS=1"


@pytest.fixture(scope="module")
def decode_b1(tmp_path_factory):
    """The decode_b1 sample's diagnosis with its store kept, its charts, and its notebook."""
    folder = tmp_path_factory.mktemp("decode_b1")
    store = folder / "decode_b1.duckdb"
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(REPO)  # the inputs as a user in the repository gives them
        d = analyze(["samples/decode_b1/decode_b1.sqlite"], AnalyzeOptions(report_data=True, db=str(store)))
    d.store_path = None  # the snapshots hold no temporary path
    d.notes = [n for n in d.notes if "store was kept" not in n]
    charts = charts_mod.build(d)
    notebook = folder / "decode_b1.ipynb"
    notebook.write_text(notebook_mod.render(d, charts=charts, store="decode_b1.duckdb"))
    return d, charts, notebook


def test_html_and_notebook_snapshots(decode_b1):
    d, charts, notebook = decode_b1
    check_snapshot("decode_b1.html", strip_volatile(html_mod.render(d, charts=charts)))
    nb = json.loads(notebook.read_text())
    cells = "\n\n".join(f"[{c['cell_type']}]\n{c['source']}" for c in nb["cells"])
    check_snapshot("decode_b1.ipynb.txt", cells + "\n")


@pytest.mark.slow
def test_notebook_is_valid_and_runs(decode_b1):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    d, _, path = decode_b1
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert any(c.get("attachments") for c in nb.cells if c.cell_type == "markdown")
    client = nbclient.NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors, errors[0]
    # Each finding's rule query ran again, on the store beside the notebook, and shows its rows.
    outputs = [c for c in nb.cells if c.cell_type == "code" and "one of its rows is this finding" in c.source]
    assert len(outputs) == len(d.findings)
    for c in outputs:
        assert c.outputs and "impact_ns" in json.dumps(c.outputs[-1].get("data", {}))
    executed = path.with_name("decode_b1.executed.ipynb")
    nbformat.write(nb, executed)
    keep_artifact(executed)


@pytest.mark.slow
def test_cli_html_with_charts_and_default_name(tmp_path):
    r = run_cli("analyze", str(sample("decode_b1_graphs")), "--format", "html", "--charts", "charts", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    page = tmp_path / "decode_b1_graphs.html"
    assert page.exists() and "wrote decode_b1_graphs.html" in r.stderr
    assert r.stdout == ""
    pngs = sorted(p.name for p in (tmp_path / "charts").glob("*.png"))
    svgs = sorted(p.name for p in (tmp_path / "charts").glob("*.svg"))
    assert "timeline.png" in pngs and [p[:-4] for p in pngs] == [s[:-4] for s in svgs]
    assert all((tmp_path / "charts" / p).read_bytes().startswith(b"\x89PNG") for p in pngs)


@pytest.mark.slow
def test_cli_output_file_for_text_formats_with_charts(tmp_path):
    args = ["analyze", str(sample("decode_b1_graphs")), "--format", "json", "-o", "out/d.json", "--charts", "c"]
    (tmp_path / "out").mkdir()  # -o does not make folders; --charts makes its own
    r = run_cli(*args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "" and json.loads((tmp_path / "out" / "d.json").read_text())["findings"][0]["sql"]["query"]
    assert (tmp_path / "c" / "timeline.svg").exists() and (tmp_path / "c" / "timeline.png").exists()


@pytest.mark.slow
def test_cli_notebook_keeps_its_store(tmp_path):
    args = ["analyze", str(sample("decode_b1_graphs")), "--format", "ipynb", "-o", "nb/run.ipynb"]
    (tmp_path / "nb").mkdir()
    for _ in range(2):  # the second run replaces the store it made the first time
        r = run_cli(*args, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert "nb/run.duckdb" in r.stderr
    nb = json.loads((tmp_path / "nb" / "run.ipynb").read_text())
    assert "STORE = 'run.duckdb'" in nb["cells"][1]["source"]
    (tmp_path / "nb" / "other.duckdb").write_text("not a database")
    r = run_cli("analyze", str(sample("decode_b1_graphs")), "--format", "ipynb", "-o", "nb/other.ipynb", cwd=tmp_path)
    assert r.returncode == 2 and "is not an nsight-doctor store" in r.stderr


def test_cli_pdf_without_a_browser(tmp_path):
    r = run_cli(
        "analyze",
        str(sample("decode_b1_graphs")),
        "--format",
        "pdf",
        "-o",
        "r.pdf",
        env={"NSIGHT_DOCTOR_BROWSER": str(tmp_path / "no-such-browser")},
        cwd=tmp_path,
    )
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "chromium" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "r.pdf").exists()


@requires_chromium
@requires_poppler
@pytest.mark.browser
def test_cli_pdf(tmp_path):
    r = run_cli("analyze", str(sample("decode_b1_graphs")), "--format", "pdf", "-o", "report.pdf", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    pdf = tmp_path / "report.pdf"
    assert pdf.read_bytes().startswith(b"%PDF")
    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    assert "Where a step goes" in text and "Timeline of a representative window" in text
    subprocess.run(["pdftoppm", "-r", "40", "-png", "-f", "1", "-l", "2", str(pdf), str(tmp_path / "page")], check=True)
    pages = sorted(tmp_path.glob("page*.png"))
    assert len(pages) == 2 and all(p.stat().st_size > 5_000 for p in pages)
    keep_artifact(pdf)
    keep_artifact(pages[0])


@pytest.mark.slow
def test_phases_appear_with_the_summary_phases(reports):
    """The phase table and the step-time chart come from summary.phases: continuous batching
    has a prefill, mixed prefill-decode steps, then decode (after the start-up: the paged cache
    zeroed before the first step)."""
    d, charts, page, _ = reports["hf_cb_graphs"]
    assert [p.name for p in d.summary.phases] == ["startup", "prefill", "mixed", "decode"]
    assert "phases" in [c.id for c in charts]
    text = page.read_text()
    assert "<h3>Phases</h3>" in text and "mixed" in text


@pytest.mark.slow
def test_the_html_step_card_says_what_the_text_says(tmp_path):
    """One step time: the card shows the steady steps' median, as the text summary does."""
    path = sample("decode_b1_graphs")
    html = tmp_path / "r.html"
    r = run_cli("analyze", str(path), "--format", "html", "-o", str(html), "--no-cache")
    assert r.returncode == 0, r.stderr
    m = re.search(r'<div class="label">Step</div><div class="value">([^<]+)</div>', html.read_text())
    assert m, "no step card"
    text = run_cli("analyze", str(path), "--no-cache").stdout
    assert f"of median {m.group(1)}" in " ".join(text.split())


@requires_chromium
@pytest.mark.browser
def test_summary_tables_head_their_columns_in_words_and_fit_their_box(reports, browser):
    """The summary's tables: a column whose cells say "7.2 ms" is headed "duration", not
    "duration_ns"; and every table stays inside the summary's box (it scrolls if it must)."""
    _, _, page, _ = reports["decode_b512_ncu"]
    browser.open(page, ALL_DRAWN)
    heads = browser.evaluate("Array.from(document.querySelectorAll('#summary th')).map(t => t.textContent)")
    assert heads and not [h for h in heads if h.endswith(("_ns", "_pct"))], heads
    assert "duration" in heads
    boxes = browser.evaluate(
        """(() => { const s = document.querySelector('#summary').getBoundingClientRect();
                    return Array.from(document.querySelectorAll('#summary .scroll')).map(d => {
                      const r = d.getBoundingClientRect(); return [r.left - s.left, s.right - r.right]; }); })()"""
    )
    assert boxes and all(left >= -1 and right >= -1 for left, right in boxes), boxes
    assert browser.errors() == []


@requires_chromium
@pytest.mark.parametrize("name", ["decode_b1_gpumetrics", "hf_cb_graphs"])
@pytest.mark.browser
def test_charts_read_at_their_scale(reports, browser, name):
    """No axis labels run into each other ("450500"); the timeline's rows name their thread
    ("CUDA calls, thread 511 (python3)", not "CPU 511:511"); and it opens on a window that
    can be read, the rest a drag away."""
    _, _, page, _ = reports[name]
    browser.open(page, ALL_DRAWN)
    overlaps = browser.evaluate(
        """(() => { const bad = [];
             for (const axis of document.querySelectorAll('svg .role-axis-label')) {
               const boxes = Array.from(axis.querySelectorAll('text'))
                 .filter(t => t.textContent && getComputedStyle(t).opacity !== '0' && t.getAttribute('opacity') !== '0')
                 .map(t => [t.textContent, t.getBoundingClientRect()]);
               for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
                 const [a, ra] = boxes[i], [b, rb] = boxes[j];
                 if (ra.width && rb.width && ra.left < rb.right - 1 && rb.left < ra.right - 1
                     && ra.top < rb.bottom - 1 && rb.top < ra.bottom - 1) bad.push(a + ' / ' + b);
               } }
             return bad; })()"""
    )
    assert overlaps == [], overlaps[:5]
    lanes = browser.evaluate(
        "Array.from(document.querySelectorAll('#vis-timeline svg .role-axis-label text')).map(t => t.textContent)"
    )
    assert any(t.startswith("CUDA calls, thread ") for t in lanes), lanes
    assert not [t for t in lanes if re.fullmatch(r"(CPU|NVTX) \d+:\d+", t)], lanes
    if name == "decode_b1_gpumetrics":  # a decode step of 494 kernels
        assert browser.evaluate("document.body.innerText.includes('It opens on the first 80 of its')")


@pytest.mark.slow
def test_utilisation_zooms_to_a_steady_state_that_a_long_start_up_would_flatten(tmp_path):
    """hf_startup: start-up is most of the window, so the chart bins the steady state alone
    (and says so), not a flat line with one spike."""
    path = unxz(sample("hf_startup", ".sqlite.xz"), tmp_path)
    d = analyze([path], AnalyzeOptions(report_data=True, cache=False))
    st = d.summary.steady_state
    assert st is not None and st.share_pct is not None and st.share_pct < 50
    ds = d.datasets["utilisation"]
    assert "over the steady state" in ds.note and "start-up left out" in ds.note
    assert ds.rows
