"""The pipeline: ingest -> store -> summary and rules -> a Diagnosis for the renderers.

``analyze()`` is the library API that the command line wraps.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from nsight_doctor import __version__, rules, store, summary
from nsight_doctor.errors import ResourceError, is_interrupt, is_out_of_memory
from nsight_doctor.model import Diagnosis
from nsight_doctor.sections import Summary


@dataclass
class AnalyzeOptions:
    rules_dirs: Sequence[str] = ()
    select: Sequence[str] = ()
    ignore: Sequence[str] = ()
    thresholds: dict[str, str] = field(default_factory=dict)  # "rule-id.name" -> value
    db: str | None = None  # keep the DuckDB store in this file
    nsys: str | None = None  # path of the nsys binary for .nsys-rep inputs
    largest_gaps: int = 10
    command: str = ""
    progress: Callable[[str], None] | None = None
    memory_limit: str | None = None  # DuckDB's memory limit, e.g. "2GB" (default: from the input's size)
    export_timeout: float | None = None  # seconds that an nsys export may take (None: no limit)


def analyze(inputs: Sequence[str | os.PathLike], options: AnalyzeOptions | None = None) -> Diagnosis:
    """Reads the profiles, runs the rules, and returns the ranked diagnosis."""
    opts = options or AnalyzeOptions()
    # Rules are loaded first, so that a bad rule or option fails before a long ingest.
    all_rules, warnings = rules.load_rules(opts.rules_dirs)
    chosen = rules.with_overrides(rules.select_rules(all_rules, opts.select, opts.ignore), opts.thresholds)

    stage = "reading the inputs"
    try:
        built = store.build(
            inputs,
            db=opts.db,
            nsys_path=opts.nsys,
            progress=opts.progress,
            memory_limit=opts.memory_limit,
            export_timeout=opts.export_timeout,
        )
        try:
            con = built.connect()
            try:
                stage = "summarising"
                if opts.progress:
                    opts.progress("summary")
                summ = summary.summarize(con, opts.largest_gaps)
                stage = "running the rules"
                if opts.progress:
                    opts.progress("rules")
                findings, skipped = rules.evaluate(con, chosen)
            finally:
                con.close()
        finally:
            built.close()
    except Exception as e:
        if is_out_of_memory(e) and not is_interrupt(e):
            raise ResourceError(out_of_memory_message(inputs, stage, opts.memory_limit)) from e
        raise

    notes = list(warnings)
    for info in built.inputs:
        notes.extend(info.notes)
    notes.extend(missing_data_notes(built.inputs, summ))
    if opts.db:
        notes.append(f"the DuckDB store was kept in {opts.db}")
    return Diagnosis(
        tool={"name": "nsight-doctor", "version": __version__},
        command=opts.command,
        inputs=[input_record(i) for i in built.inputs],
        summary=summ,
        findings=findings,
        skipped=skipped,
        notes=notes,
    )


def out_of_memory_message(inputs: Sequence[str | os.PathLike], stage: str, limit: str | None) -> str:
    names = ", ".join(f"'{p}'" for p in inputs)
    if limit:
        now = f"the memory limit of {limit} (--memory-limit)"
        hint = "raise --memory-limit"
    else:
        now = f"the default memory limit of {store.store_config(inputs, Path('.'))['memory_limit']}"
        hint = "give a larger one with --memory-limit, e.g. --memory-limit 4GB"
    return f"analysing {names} ran out of memory while {stage}: it needs more than {now}; {hint}"


def missing_data_notes(inputs, summ: Summary) -> list[str]:
    """What the capture lacks that a user could add, said once in the diagnosis."""
    kinds = {i.kind for i in inputs}
    timeline = kinds & {"nsys-rep", "nsys-sqlite", "nsys-parquet", "nvprof"}
    notes = []
    if timeline and summ.capture.gpu_window_ns and not summ.nvtx:
        src = (
            "nvprof files carry no NVTX ranges that nsight-doctor reads"
            if kinds == {"nvprof"} or "nvprof" in kinds
            else "the capture has no NVTX ranges"
        )
        notes.append(f"no GPU time per NVTX range: {src} (mark the steps of your loop with NVTX; docs/capture.md)")
    if "nvprof" in kinds:
        notes.append("nvprof does not sample GPU metrics: SM and DRAM activity over time are unavailable")
    return notes


def input_record(info) -> dict:
    d = asdict(info)
    d.pop("notes", None)
    return d
