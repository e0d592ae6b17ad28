"""Generates the reference docs from the code's own data, so that they cannot drift:
docs/rules/<id>.md and docs/rules/index.md from the rule files, docs/schema.md from the
header comments of the view files, docs/json.md and the JSON Schemas of the output
(render/report_schema.json, render/compare_schema.json) from the typed summary (sections/)
and the typed comparison (compare/model.py), docs/tags.md from
model.TAGS, and docs/cli.md from the command line's own help.

    python -m nsight_doctor.docgen          # rewrite docs/ in a source checkout
    python -m nsight_doctor.docgen --check  # exit 1 if docs/ is not current (CI)
"""

from __future__ import annotations

import dataclasses
import json
import sys
import typing
from pathlib import Path
from typing import Any

from nsight_doctor.docgen.rules import GENERATED, write_rule_pages
from nsight_doctor.model import TAGS
from nsight_doctor.store.docs import column_docs, view_docs


def schema_page() -> str:
    out = [
        GENERATED.format(source="src/nsight_doctor/store/views/*.sql and src/nsight_doctor/store/timeline/tables.yaml"),
        "",
        "# The store: documented views",
        "",
        "`nsight-doctor analyze --db FILE` keeps the DuckDB database it builds, so these views "
        'can be queried directly (`nsight-doctor query --db FILE "SQL"`). Rules read only these views. '
        "Times are in nanoseconds from the start of the capture; names are resolved from the export's "
        "string table.",
        "",
    ]
    for name, desc, cols in view_docs():
        out += [f"## `{name}`", "", desc, "", "| Column | Meaning |", "|---|---|"]
        out += [f"| `{c}` | {d} |" for c, d in cols]
        out += [""]
    return "\n".join(out)


def fleet_schema_page() -> str:
    """The fleet database's tables: the fixed ones from archive/tables/*.sql, the derived ones
    from the typed summary and the store's ncu_kernels view."""
    from nsight_doctor.archive.schema import SCHEMA_VERSION, all_tables

    out = [
        GENERATED.format(source="src/nsight_doctor/archive/tables/*.sql and the typed summary"),
        "",
        "# The fleet database: tables",
        "",
        f"`nsight-doctor ingest` writes these tables (schema version {SCHEMA_VERSION}); `nsight-doctor query`, "
        "`report` and `export` read them (docs/archive.md). Every per-profile table has `profile_id`, the sha256 "
        "of the profile's content, which joins it to `profiles`. Times are in nanoseconds unless the name says "
        "otherwise; `_pct` values are percentages (0-100). The `summaries` columns and the `summary_*` tables "
        "are derived from the summary of the JSON output (docs/json.md): a field added there appears here, and "
        "an older database gains it at its next ingest.",
        "",
    ]
    for t in all_tables():
        out += [f"## `{t.name}`", "", t.doc[0].upper() + t.doc[1:], "", "| Column | Type | Meaning |", "|---|---|---|"]
        out += [f"| `{c.name}` | {c.type} | {' '.join(c.doc.split())} |" for c in t.columns]
        out += [""]
    return "\n".join(out)


def tags_page() -> str:
    out = [
        GENERATED.format(source="src/nsight_doctor/model.py (TAGS)"),
        "",
        "# Tags",
        "",
        "Every rule carries one or more tags from this fixed vocabulary; `--select` and `--ignore`",
        "accept tags as well as rule ids. Rule files with any other tag are rejected when they load.",
        "",
        "| Tag | Meaning |",
        "|---|---|",
    ]
    out += [f"| `{tag}` | {meaning} |" for tag, meaning in TAGS.items()]
    return "\n".join(out) + "\n"


JSON_INTRO = """# JSON output

`nsight-doctor analyze PROFILE --format json` prints one JSON object. It is versioned by
`schema_version`: fields may be added within a version, but none is removed or changes meaning
without a new version. Its JSON Schema ships with the package
(`src/nsight_doctor/render/report_schema.json`, generated like this page); the tests validate
every sample's output against it. All times are integers in nanoseconds unless the name says
otherwise; `_pct` values are percentages (0-100).

Version 2 splits each idle gap into parts (the state of the thread that launches the GPU's work:
launch, queued, sync, cpu, api, setup) instead of giving the whole gap one cause: in
`idle.by_cause` and `steady_gpus.idle`, `total_ns` is a part's total and `count` the gaps with
time in that part, so the counts may add up to more than the gaps. It adds `steps`,
`steady_gpus.step_source`, `step_parts` and `idle_code`.

```json
{
  "schema_version": 2,
  "tool": {"name": "nsight-doctor", "version": "0.1.0"},
  "command": "nsight-doctor analyze run.sqlite --format json",
  "inputs": [{"path": "run.sqlite", "kind": "nsys-sqlite", "producer": "Nsight Systems",
              "producer_version": "2025.3.2.0", "export_path": null, "export_schema_version": "3.20.3"}],
  "summary": {"capture_ns": 545789882, "gpu_window_ns": 497205890, "gpu_busy_pct": 8.87, "...": "..."},
  "findings": [{"rank": 1, "rule_id": "launch-bound", "title": "...", "severity": "high",
                "tags": ["launch-bound", "idle-gaps"], "impact_ns": 420371234, "message": "...",
                "recommendation": "...", "evidence": {"kernels": 15808, "...": "..."}, "references": [],
                "sql": {"query": "WITH ... SELECT ..."}}],
  "skipped_rules": [{"rule_id": "low-sm-activity", "reason": "no rows in gpu_metrics"}],
  "notes": []
}
```

## `inputs[]`

| Field | Meaning |
|---|---|
| `path` | the path as given |
| `kind` | `nsys-rep`, `nsys-sqlite`, `nsys-parquet`, `ncu-rep`, `nvprof` |
| `producer`, `producer_version` | the tool and version that wrote the file: for a report, the nsys (or ncu) \
that captured it; for an export, the nsys that exported it |
| `export_path` | for a report, the export that was read (beside it, or in the cache) |
| `export_schema_version` | `EXPORT_SCHEMA_VERSION` of the export (3.0.0 is nsys 2022.4, 3.20.3 is 2025.3) |

## `summary`

Each part of the summary is computed by a documented view of the store (docs/schema.md),
named below; a field's meaning is that of the view's column.
"""

JSON_OUTRO = """## `findings[]`

In rank order: most recoverable time first, severity breaking ties. `impact_ns` is the
rule's estimate of the time a fix would recover (each rule's page in docs/rules says how it
is estimated); profile-health findings have 0. `window_ns` is the time it is a share of, and
`severity` follows from that share on one scale for every rule (docs/rules/index.md).
`evidence` holds the row of the rule's query (numbers with their units in the key: `_ns`,
`_pct`, `bytes`) and, for some rules, tables as lists of objects (e.g. `largest_gaps`).
`title`, `message` and `recommendation` are plain text; kernel names and NVTX text inside them are exactly as recorded.

`sql` is the finding's provenance: the SQL that produced its evidence, runnable as it is
against the store kept with `--db` (docs/reports.md). `sql.query` is the rule's query with
its thresholds written in as literal values: one of its rows is the finding's evidence (with
`impact_ns`). Each evidence table has its own entry (`sql.largest_gaps`, ...), with the
finding's row values written in as well.

## `skipped_rules[]`, `notes[]`

Rules that did not apply, with the reason (for example, no GPU metrics were sampled), and
notes about the run (an export that was reused, a rule without tests).
"""


def type_args(tp: Any) -> list[Any]:
    """A type and every type nested in it (list[dict[str, X]] | None gives X too)."""
    return [tp, *[x for a in typing.get_args(tp) for x in type_args(a)]]


def section_table(cls: Any, docs: dict[str, dict[str, str]], heading: str) -> list[str]:
    """A Markdown table of a section's JSON fields, then one for each child section."""
    from nsight_doctor.sections import Section

    hints = typing.get_type_hints(cls)
    rows, children = [], []
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        sub = next((a for a in type_args(tp) if isinstance(a, type) and issubclass(a, Section)), None)
        if f.metadata.get("flatten") and sub:
            flat = section_table(sub, docs, heading)
            rows += [r for r in flat[4:] if r.startswith("| `")]
            continue
        doc = f.metadata.get("doc") or docs.get(cls.VIEW, {}).get(f.name, "")
        if sub is not None:
            shape = (
                "a list of objects"
                if "list[" in str(tp)
                else "an object of objects"
                if "dict[" in str(tp)
                else "an object"
            )
            doc = f"{doc}: {shape}, see below" if doc else f"{shape}, see below"
            children.append((f.name, sub))
        rows.append(f"| `{f.name}` | {doc} |")
    view = f" (view `{cls.VIEW}`)" if getattr(cls, "VIEW", "") else ""
    out = [f"### `{heading}`{view}", "", "| Field | Meaning |", "|---|---|", *rows, ""]
    for name, sub in children:
        out += section_table(sub, docs, f"{heading}.{name}" if heading != "summary" else name)
    return out


COMPARE_INTRO = """## Comparison output (`nsight-doctor compare --format json`)

`compare` prints one JSON object, versioned by its own `schema_version` (same rules as above);
its JSON Schema is `src/nsight_doctor/render/compare_schema.json`. docs/compare.md explains
the comparison. Each entry of `profiles[]` holds what `analyze --format json` gives for that
profile (`report_schema_version` says which version of it), and every number in `deltas` is
one of those profiles' summary fields, or a sum, ratio or difference of such fields. Lists
named "per profile" have one entry per profile, in the order of `profiles[]`.

```json
{
  "schema_version": 1, "report_schema_version": 2, "kind": "comparison",
  "tool": {"name": "nsight-doctor", "version": "0.1.0"},
  "command": "nsight-doctor compare eager.sqlite graphs.sqlite --format json",
  "profiles": [{"label": "eager", "path": "eager.sqlite", "inputs": [], "summary": {}, "findings": [],
                "skipped_rules": [], "notes": []}, {"label": "graphs", "...": "..."}],
  "deltas": {"basis": "step", "overview": [{"key": "step_ns_median", "label": "Step time, median",
             "unit": "ns", "better": "lower", "values": [14117822.5, 1766397.5], "change_pct": [null, -87.5]}],
             "...": "..."},
  "findings_diff": [{"baseline": "eager", "candidate": "graphs", "changes": [{"rule_id": "launch-bound",
                     "subject": "GPU 0", "status": "resolved", "...": "..."}]}],
  "warnings": [{"code": "graph-trace", "message": "..."}],
  "verdict": {"text": "The graphs run is 8.0x faster per decode step than the eager run ...", "...": "..."},
  "gate": {"metric": "decode_step", "label": "median decode step time", "baseline": 14117822.5,
           "candidate": 1766397.5, "change_pct": -87.5, "threshold_pct": 10, "failed": false}
}
```

### `profiles[]`

| Field | Meaning |
|---|---|
| `label` | the profile's label (`--label`, else its file name) |
| `path` | the profile as given on the command line (files joined by commas) |
| `inputs`, `summary`, `findings`, `skipped_rules`, `notes` | as `analyze --format json` gives them (above) |
"""


def dataclass_table(cls: Any, heading: str) -> list[str]:
    """A Markdown table of a comparison dataclass's JSON fields (their docs), then one for each
    nested dataclass."""
    hints = typing.get_type_hints(cls)
    rows, children = [], []
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        sub = next((a for a in type_args(tp) if dataclasses.is_dataclass(a)), None)
        doc = f.metadata.get("doc", "")
        if sub is not None:
            shape = "a list of objects" if "list[" in str(tp) else "an object"
            doc = f"{doc}: {shape}, see below"
            children.append((f.name, sub, "list[" in str(tp)))
        rows.append(f"| `{f.name}` | {doc} |")
    out = [f"### `{heading}`", "", "| Field | Meaning |", "|---|---|", *rows, ""]
    for name, sub, is_list in children:
        out += dataclass_table(sub, f"{heading}.{name}{'[]' if is_list else ''}")
    return out


def json_page() -> str:
    from nsight_doctor.compare import CompareWarning, Deltas, FindingsDiff, Gate, Verdict
    from nsight_doctor.sections import Summary

    lines = [
        GENERATED.format(
            source="src/nsight_doctor/sections/, the summary views and src/nsight_doctor/compare/model.py"
        ),
        "",
        JSON_INTRO,
        *section_table(Summary, column_docs(), "summary"),
        JSON_OUTRO,
        COMPARE_INTRO,
        *dataclass_table(Deltas, "deltas"),
        *dataclass_table(FindingsDiff, "findings_diff[]"),
        *dataclass_table(CompareWarning, "warnings[]"),
        *dataclass_table(Verdict, "verdict"),
        *dataclass_table(Gate, "gate"),
    ]
    return "\n".join(lines)


def report_schema_text() -> str:
    from nsight_doctor.render.json_out import report_schema

    return json.dumps(report_schema(), indent=1) + "\n"


def compare_schema_text() -> str:
    from nsight_doctor.render.compare import compare_schema

    return json.dumps(compare_schema(), indent=1) + "\n"


def cli_page() -> str:
    """Every command's --help, as the command line prints it."""
    import click

    from nsight_doctor.cli import main as cli

    out = [
        GENERATED.format(source="the click commands in src/nsight_doctor/cli/"),
        "",
        "# Command-line reference",
        "",
        "Each command's `--help`, as printed by the tool.",
        "",
    ]

    def walk(cmd: click.Command, path: list[str], parent: click.Context | None) -> None:
        # Contexts chained as the command line makes them, so that subcommands inherit the
        # group's context_settings (its -h/--help): click caches a command's help option from
        # the first context that asks, so a bare context here would also depend on test order.
        settings = dict(cmd.context_settings) if parent is None else {}
        ctx = click.Context(
            cmd, info_name=path[-1], parent=parent, terminal_width=100, max_content_width=100, **settings
        )
        out.extend([f"## `{' '.join(path)}`", "", "```", cmd.get_help(ctx).rstrip(), "```", ""])
        if isinstance(cmd, click.Group):
            for name in sorted(cmd.list_commands(ctx)):
                sub = cmd.get_command(ctx, name)
                assert sub is not None
                walk(sub, [*path, name], ctx)

    walk(cli, ["nsight-doctor"], None)
    return "\n".join(out)


LLM_INTRO = """# LLM serving: phases, steps, kernel categories and advice

A serving capture is start-up (imports, weight uploads, module loads, CUDA-graph capture),
warm-up, then steady work made of steps. nsight-doctor splits each GPU's timeline into
phases and measures its findings on the steady state, so that a model load does not
pass for a per-token problem. Start-up findings are listed after the steady-state ones.

## Steps and phases

A step is one iteration of the loop that drives the GPU: in serving, one forward pass.
Candidates are scored per GPU, and the choice is shown with its evidence and a confidence
(`summary.steady_gpus[].step_source`; a weak choice is a profile note):

- the program's NVTX ranges: an engine's own step ranges (vLLM
  `execute_context_N(M)_generation_N(M)`, TensorRT-LLM `[Executor] _forward_step`, SGLang
  `scheduler.run_batch`), ranges whose names say step, decode, prefill, forward, iteration or
  batch, else the outermost repeated range with GPU work. Ranges named for a part of a step
  (layer, block, attention, mlp, in CamelCase too: a module hook's `LlamaDecoderLayer`) are
  parts, a library's ranges never count, and ranges whose GPU work overlaps cannot be steps.
  Where the kernels show the passes (the step's own kernels below), a range that recurs 1.5
  times as often or more is a part of a pass whatever its name, and one that recurs 1.5 times
  less often holds many passes (a request, a `generate()` call) unless its name says step;
- the work itself: a kernel (by name and launch configuration) or a CUDA graph replay that
  recurs at a regular stride. The step's own kernels (the token embedding lookup, sampling;
  the lookup by any of its kernels where there are several: a long prompt's chunks use
  PyTorch's gather, the decode steps index_select's small-index kernel) rank first, then
  graph replays, then a round trip to the host in every period; within a rank
  the finest period wins, so a layer (more frequent, without the step's own kernels) or a
  request (less frequent) is not taken for a step. A kernel launched back to back with itself
  (beam search's KV-cache reorder runs the embedding's index_select once per layer) is not a
  step's own kernel, and a top-k with a round trip to the host in every period, a little more
  frequent than the embedding lookup, holds the prompts' passes the lookup ran with another
  kernel (beam search). Where two models take turns (speculative decoding: a draft model's
  passes, then one pass of the target that checks them), told apart by their embedding
  lookups' launch dimensions and by passes of very different lengths that each pick a token,
  a step is a round: the target's pass and the draft's. A model that indexes its embedding
  table (an indexing kernel like any other) is told by its argmax or sampling kernel instead,
  and CUDA graphs traced whole (nsys' default) by two graphs, each model's one; without a
  lookup, the target's pass must be the rarer and the longer, after the same 2 to 10 of the
  draft's every round (one model's two picks a pass, a pass in two graphs, graphs of many
  lengths in a cycle as vLLM's piecewise ones, two batch sizes' graphs as the batches come, or
  a prefill graph before a request's decodes are no rounds; nor is a draft whose proposals
  vary in number, traced whole). Where CUDA graphs traced whole replay in turn, each once
  between two round trips to the host that their launches as a whole do not each hold (a pass
  captured in two graphs by a graph break that launches no GPU work, or one draft pass and the
  target's), a step is one turn of all of them, at medium confidence: nothing in such a trace
  tells the two apart, and each gives the same steps. Irregular steps (a plan built inside
  one, a new shape) are still steps. A level is a layer of a coarser one only where it recurs a
  whole number of times in that one's median period, not where the counts merely fit.
  A step begins where the host read a result back, not after waits for uploads that come by
  the dozen in every period (layers offloaded to host memory wait for their weights).

GPUs of one job (the same kernels over the same time) use one signature, so that ranks get
the same steps; where they cannot, a note says so. A GPU that two or more processes share (a
tenth of its kernel time each or more) counts its steps in the work of the one with the most,
and a note names them: its busy and idle time are all of theirs.

Each step's wall time is split by what bounded it, from the state of the thread that launches
the GPU's work: GPU busy (`gpu`), GPU busy while that thread waited for it in a blocking call
or by polling an event (`blocked`; three or more `cudaEventQuery` or `cudaStreamQuery` calls
in a row, no other CUDA call between them, are a wait, as event-loop servers wait), and the
idle parts: waiting for launches (`launch`), work already queued
(`queued`), the thread still inside a blocking call (`sync`), running code outside CUDA
(`cpu`), in other CUDA calls (`api`), and one-time work and compiling (`setup`). The parts add up
to the step (`summary.steps`, and `step_parts` per GPU); each rule claims its own parts, so no
time is counted twice. With CPU or Python samples in the capture (docs/capture.md), the CPU
time of the idle gaps is attributed to the functions sampled on the launching thread, and to
the program's NVTX ranges (`idle_code`).

Phases come from the steps. prefill, decode and mixed are given only where a serving framework
is detected, an NVTX range names the kind, the steps are CUDA graph replays of a detected
framework, or at least half of the steps read tokens (an embedding kernel, PyTorch's gather, a
kernel named for an embedding, or llama.cpp's `get_rows`; or the steps are graph replays, which
hide it; the ranks of one job read tokens where one does, as a pipeline's first stage) and
either are token-shaped (each holds sampling or a token embedding lookup) or hold attention or
an embedding lookup, and GEMMs, with convolutions under a tenth of the kernel time (a diffusion
UNet holds attention and GEMMs too); never with a backward pass. A transformer over image
patches (a ViT, most diffusion transformers) reads no tokens, and its argmax over classes looks
like sampling; one that looks a class label up every pass (DiT's class-conditional models)
would still be taken for a language model. Other steady work is `steady`. Kernel code built
while shapes keep changing through the run is steady-state cost (`steady-compile`), not
start-up. The `steps`
and `phases` tables ([schema.md](schema.md)) give the exact definitions.

| Phase | Meaning |
|---|---|
| `startup` | before the first step: module loads, weight copies, allocator growth, graph capture |
| `warmup` | slow leading steps with the GPU mostly idle, and a one-off compile with the work before it |
| `prefill` | the first step of a stretch whose work differs from the rest, or steps of long GEMMs (GPU busy) |
| `decode` | short GEMMs (weight streaming), alike steps before or after a prefill, graph replays hiding their GEMMs |
| `mixed` | later steps that differ from the rest: continuous batching adding prompts to running decodes |
| `steady` | steady work whose kind is not known |
| `idle` | a long stretch with no GPU work between steady stretches |

What the tool cannot see it says: CUDA graphs traced as whole graphs hide their kernels
(rule `graph-kernels-hidden`), NVTX ranges that cover little of the GPU work make per-range
numbers partial (`nvtx-coverage`), and a capture without GPU work names the processes it
caught (`no-gpu-activity`).
"""


def cell(text: str) -> str:
    """Text for a Markdown table cell."""
    return text.replace("|", "\\|")


def llm_page() -> str:
    """Phases, the kernel taxonomy and the advice table, from the data files."""
    from nsight_doctor.store import advice_rows
    from nsight_doctor.store.taxonomy import categories

    out = [
        GENERATED.format(
            source="src/nsight_doctor/store/kernel_categories.yaml and src/nsight_doctor/store/advice.yaml"
        ),
        "",
        LLM_INTRO,
        "## Kernel categories",
        "",
        "Each kernel gets one category from its name (ordered patterns in",
        "`src/nsight_doctor/store/kernel_categories.yaml`); the summary gives the steady state's",
        "kernel time per category.",
        "",
        "| Category | Meaning |",
        "|---|---|",
    ]
    out += [f"| `{c}` | {meaning} |" for c, meaning in categories().items()]
    out += [
        "",
        "## Advice in each framework's terms",
        "",
        "The framework is detected from the command line, environment, NVTX ranges, Python samples",
        "and kernel names (the `framework` view); environment variables alone (`HF_HOME`, `VLLM_*`: often",
        "set machine-wide) count only beside a language model's kernels or CUDA graph replays.",
        "Rules take their advice from this table: the detected framework's text when the capture",
        "looks like a model loop (its steady state has steps), else the generic one.",
        "",
    ]
    by_topic: dict[str, list[tuple[str, str]]] = {}
    for topic, fw, text in advice_rows():
        by_topic.setdefault(topic, []).append((fw, text))
    for topic, rows in by_topic.items():
        out += [f"### `{topic}`", "", "| Framework | Advice |", "|---|---|"]
        out += [f"| {fw} | {cell(text)} |" for fw, text in rows]
        out.append("")
    return "\n".join(out)


def generated_files(root: Path) -> dict[Path, str]:
    """Every generated file other than the rule pages, with its current text."""
    return {
        root / "docs" / "schema.md": schema_page(),
        root / "docs" / "json.md": json_page(),
        root / "docs" / "tags.md": tags_page(),
        root / "docs" / "cli.md": cli_page(),
        root / "docs" / "llm.md": llm_page(),
        root / "docs" / "fleet-schema.md": fleet_schema_page(),
        root / "src" / "nsight_doctor" / "render" / "report_schema.json": report_schema_text(),
        root / "src" / "nsight_doctor" / "render" / "compare_schema.json": compare_schema_text(),
    }


def main(argv: list[str] | None = None) -> int:
    from nsight_doctor.rules import load_rules

    argv = sys.argv[1:] if argv is None else argv
    check = "--check" in argv
    root = Path(__file__).resolve().parents[3]
    rules, _ = load_rules()
    stale = [f"docs/rules/{n}" for n in write_rule_pages(rules, root / "docs" / "rules", check)]
    for path, text in generated_files(root).items():
        if not path.exists() or path.read_text() != text:
            stale.append(str(path.relative_to(root)))
            if not check:
                path.write_text(text)
    if stale:
        verb = "out of date" if check else "rewrote"
        print(f"{verb}: {', '.join(stale)}", file=sys.stderr)
    return 1 if (check and stale) else 0
