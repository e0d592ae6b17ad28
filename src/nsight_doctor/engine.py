"""The pipeline: ingest -> store -> summary and rules -> a Diagnosis for the renderers.

``analyze()`` is the library API that the command line wraps.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from nsight_doctor import __version__, analysis_cache, report_data, rules, store, summary
from nsight_doctor.errors import InputError, ResourceError, is_interrupt, is_out_of_memory
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
    largest_gaps: int = 5
    report_data: bool = False  # also read the charts' data (report_data.py) for HTML, notebook, PDF
    command: str = ""
    progress: Callable[[str], None] | None = None
    # Reuse a finished diagnosis of the same content from the local cache, and keep this one
    # there (analysis_cache.py). The command line turns it on; --no-cache turns it off.
    cache: bool = False
    memory_limit: str | None = None  # DuckDB's memory limit, e.g. "2GB" (default: from the input's size)
    export_timeout: float | None = None  # seconds that an nsys export may take (None: no limit)
    rule_timeout: float | None = rules.DEFAULT_TIMEOUT  # seconds that one query of a rule may take


def analyze(inputs: Sequence[str | os.PathLike], options: AnalyzeOptions | None = None) -> Diagnosis:
    """Reads the profiles, runs the rules, and returns the ranked diagnosis."""
    opts = options or AnalyzeOptions()
    # Rules are loaded first, so that a bad rule or option fails before a long ingest.
    all_rules, warnings = rules.load_rules(opts.rules_dirs)
    chosen = rules.with_overrides(rules.select_rules(all_rules, opts.select, opts.ignore), opts.thresholds)

    digest = inputs_id = None
    if opts.cache or opts.db:
        digest = analysis_cache.analysis_digest(chosen, opts.largest_gaps)
        inputs_id = analysis_cache.inputs_key(inputs)
    # A cached diagnosis has no charts' data: reports with charts read the profile.
    if opts.cache and not opts.db and not opts.report_data and inputs_id and digest:
        hit = analysis_cache.load(inputs_id, digest)
        if hit is not None:
            return reused(
                hit,
                inputs,
                opts,
                "reused the cached analysis of this content (same code, rules and options); "
                "--no-cache analyses it again",
            )

    fleet_note = None
    if opts.db and digest and Path(opts.db).exists() and analysis_cache.is_fleet(opts.db):
        # A fleet database (ingest) holds finished diagnoses; analyze never writes to it.
        hit, why = analysis_cache.fleet_lookup(opts.db, inputs, digest)
        if opts.report_data:
            hit, why = None, "a report with charts reads the profile itself"
        if hit is not None:
            paths = ", ".join(i["path"] for i in hit.inputs)
            note = f"reused the fleet database {opts.db}'s analysis of this content (read from {paths})"
            return reused(hit, [], opts, note)
        fleet_note = f"analysed now, not read from the fleet database {opts.db}: {why}"
        opts = dataclasses.replace(opts, db=None)

    reused_store = bool(opts.db and inputs_id and Path(opts.db).exists())
    meta = {"inputs_sha256": inputs_id or "", "code_digest": analysis_cache.code_digest()}
    retry_note = None
    try:
        built_inputs, summ, findings, skipped, datasets = run_once(inputs, opts, chosen, reused_store, inputs_id, meta)
    except OutOfMemory as e:
        if opts.memory_limit is not None or reused_store:
            raise ResourceError(out_of_memory_message(inputs, e.stage, opts.memory_limit)) from e.__cause__
        # The default limit (store.default_memory_limit, perhaps raised after reading) was not
        # enough: once more with a larger one.
        first = e.limit or store.default_memory_limit(inputs)
        larger = store.retry_memory_limit(inputs)
        if store.megabytes(larger) <= store.megabytes(first):
            larger = store.capped(2 * store.megabytes(first))
        try:
            built_inputs, summ, findings, skipped, datasets = run_once(
                inputs, dataclasses.replace(opts, memory_limit=larger), chosen, reused_store, inputs_id, meta
            )
        except OutOfMemory as e2:
            raise ResourceError(
                out_of_memory_message(inputs, e2.stage, larger, retried=True, first=first)
            ) from e2.__cause__
        retry_note = f"the default memory limit ({first}) was not enough; analysed again with {larger}"

    notes = list(warnings)
    if retry_note:
        notes.append(retry_note)
    for info in built_inputs:
        notes.extend(info.notes)
    notes.extend(missing_data_notes(built_inputs, summ))
    result = Diagnosis(
        tool={"name": "nsight-doctor", "version": __version__},
        command=opts.command,
        inputs=[input_record(i) for i in built_inputs],
        summary=summ,
        findings=findings,
        skipped=skipped,
        notes=notes,
        datasets=datasets,
        store_path=opts.db,
    )
    if opts.cache and inputs_id and digest:
        analysis_cache.save(inputs_id, digest, result)
    if fleet_note:
        result.notes.append(fleet_note)
    if reused_store:
        result.notes.append(f"reused the store {opts.db}, built earlier from the same content: ingest skipped")
    elif opts.db:
        result.notes.append(f"the DuckDB store was kept in {opts.db}")
    return result


class OutOfMemory(Exception):
    """DuckDB ran out of memory in run_once, at this stage, under this limit (None: not known
    yet); the error is chained."""

    def __init__(self, stage: str, limit: str | None = None):
        super().__init__(stage)
        self.stage = stage
        self.limit = limit


def run_once(inputs, opts: AnalyzeOptions, chosen, reused_store: bool, inputs_id, meta) -> tuple:
    """Builds (or reuses) the store and reads the diagnosis from it: (inputs, summary,
    findings, skipped, datasets). An out-of-memory error comes back as OutOfMemory(stage)."""
    stage = "reading the inputs"
    limit: str | None = None

    def heard_limit(value: str) -> None:
        nonlocal limit
        limit = value

    def progress(step: str) -> None:
        nonlocal stage
        if step == "views":
            stage = "building the views"
        if opts.progress:
            opts.progress(step)

    try:
        if opts.db and reused_store:
            built = reuse_store(opts.db, inputs_id)
        else:
            built = store.build(
                inputs,
                db=opts.db,
                nsys_path=opts.nsys,
                progress=progress,
                meta=meta,
                memory_limit=opts.memory_limit,
                export_timeout=opts.export_timeout,
                on_memory_limit=heard_limit,
                # Rules from --rules are anyone's SQL: they read a store in a file, opened in a
                # fresh DuckDB instance that never loaded the SQLite reader (store.py).
                reopen=bool(opts.rules_dirs),
            )
        try:
            con = built.connect()
            try:
                # The summary is read beside the rules (its queries, one at a time, leave cores
                # idle); the rules need only its window, to grade their findings.
                if opts.progress:
                    opts.progress("summary")
                side = con.cursor()
                try:
                    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="summary") as pool:
                        pending = pool.submit(summary.summarize, side, opts.largest_gaps)
                        try:
                            stage = "running the rules"
                            if opts.progress:
                                opts.progress("rules")
                            found, skipped = rules.run(con, chosen, opts.rule_timeout)
                            stage = "summarising"
                            summ = pending.result()
                        except BaseException:
                            # (the pool's exit waits for the summary: stopped, it ends soon)
                            side.interrupt()
                            raise
                finally:
                    side.close()
                findings = rules.graded(found, summ.impact_window()[0])
                datasets = {}
                if opts.report_data:
                    stage = "reading the charts' data"
                    if opts.progress:
                        opts.progress("report data")
                    datasets = report_data.collect(con, summ)
            finally:
                con.close()
        finally:
            built.close()
    except Exception as e:
        if is_out_of_memory(e) and not is_interrupt(e):
            raise OutOfMemory(stage, limit) from e
        raise
    return built.inputs, summ, findings, skipped, datasets


def reused(hit: Diagnosis, inputs: Sequence[str | os.PathLike], opts: AnalyzeOptions, note: str) -> Diagnosis:
    """A diagnosis kept earlier, shown for the command and the paths given now (the same
    content may have been analysed under another name)."""
    hit.command = opts.command
    for rec, given in zip(hit.inputs, inputs):
        old, new = rec["path"], str(given)
        if old != new:
            rec["path"] = new
            hit.notes = [n.replace(old, new) for n in hit.notes]
    hit.notes.append(note)
    return hit


def reuse_store(path: str, inputs_id: str | None) -> store.Store:
    """The store that an earlier analyze --db kept, when it was built from the same content
    by the same code: ingest is skipped, summary and rules run again on it."""
    built, meta = store.reopen(path)
    if meta.get("inputs_sha256") != inputs_id:
        raise InputError(
            f"'{path}' already exists and holds the analysis of other inputs; --db reuses a store only "
            "for the same profile: choose another name or delete it"
        )
    if meta.get("code_digest") != analysis_cache.code_digest():
        raise InputError(f"'{path}' was built by another version of nsight-doctor; delete it to build it again")
    return built


def out_of_memory_message(
    inputs: Sequence[str | os.PathLike],
    stage: str,
    limit: str | None,
    retried: bool = False,
    first: str | None = None,
) -> str:
    """The one line for an analysis that ran out of memory; first: the default limit the first
    try had (given with retried)."""
    names = ", ".join(f"'{p}'" for p in inputs)
    if retried:
        now = f"{limit}, the limit of a second try after the default of {first}"
        hint = "give more with --memory-limit, e.g. --memory-limit 16GB"
    elif limit:
        now = f"the memory limit of {limit} (--memory-limit)"
        hint = "raise --memory-limit"
    else:
        now = f"the default memory limit of {store.default_memory_limit(inputs)}"
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
    notes.extend(step_notes(summ))
    return notes


def step_notes(summ: Summary) -> list[str]:
    """A weak choice of steps, and GPUs of one job whose steps disagree, said once each."""
    notes, said = [], set()
    for g in summ.steady_gpus:
        src = g.step_source
        if src is None:
            continue
        if src.confidence == "low":
            notes.append(
                f"GPU {g.device_id}: its steps were found with low confidence ({src.occurrences:,} of "
                f"{src.marker}: {src.evidence}); per-step figures may not be forward passes. Mark the steps "
                "of your loop with NVTX ranges (docs/capture.md)"
            )
        if src.processes:
            notes.append(
                f"GPU {g.device_id}: {src.processes}; its busy and idle time are all of theirs. "
                "Profile one program at a time to judge it alone"
            )
        if src.agreement and "disagree" in src.agreement and src.agreement not in said:
            said.add(src.agreement)
            notes.append(f"{src.agreement}: per-step figures of these GPUs are not comparable")
    return notes


def input_record(info) -> dict:
    d = asdict(info)
    d.pop("notes", None)
    return d
