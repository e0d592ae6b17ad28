"""Which code held the CPU while a GPU sat idle: the steady state's cpu time (gpu_gaps.cpu_ns,
the launching thread running code outside CUDA) and its compiling time (gpu_gaps.setup_ns of
gaps in which code was built: the CPU compiling it), named from the capture's samples and
ranges. Each gap's time goes to its larger part of the two (idle_code.part), the cpu time of a
gap that began with a large read-back (host-sampling's) to a part of its own.

- python: Python samples (nsys --python-sampling) of the launching thread taken in those
  stretches, by the innermost frame (function, file, line), the innermost frame in the
  program's own files (its caller, when the innermost one is in a library), and the library
  call that caller made (its entry: `generate`, or the DataLoader's `__next__` wherever one
  is on the stack, so that a wait in `threading` is told to be the loop waiting for a batch);
- native: CPU IP samples (nsys --sample) of the thread there, by the innermost resolved frame
  outside the Python interpreter, the C library and the profiler's own libraries;
- nvtx: the program's innermost NVTX range open on the thread (or its process) at each gap's
  middle, by name (digits as #), other than the step ranges and those that span half of the
  steady state;
- osrt: the thread's OS runtime calls (nsys -t osrt: sleeps, waits, polls, reads) whose middle
  falls in that time, by name, each for its time within the gap: the part of the cpu time in
  which the thread was blocked in the OS, not running code;
- threads: Python samples of the process's other threads running Python while a launching
  thread that runs Python itself sat in a condition wait (pthread_cond_wait or _timedwait,
  CPython's wait for the GIL) in that time, as python names them, less the frames of Python's
  own waits (threading, queue, selectors): the code that probably held the GIL.
A sample counts when it falls in a gap's cpu time: inside the gap, outside the thread's CUDA
calls, in a stretch between two of them of SHORT_CPU_NS or more. A source with fewer than
MIN_SAMPLES samples there on a GPU names nothing (a share of three samples is noise).
"""

from __future__ import annotations

import re

import polars as pl

from nsight_doctor.store.timeline.load import SHORT_CPU_NS

MIN_SAMPLES = 10
LIBRARY_FILE = re.compile(r"site-packages|dist-packages|/lib/python[0-9.]+/|^<frozen|^<string>")
# Frames that only pass a call on (decorators, nn.Module's call plumbing): no library call's name.
WRAPPER_FILE = re.compile(
    r"torch/utils/_contextlib\.py$|/contextlib\.py$|/functools\.py$|torch/nn/modules/module\.py$|"
    r"torch/_dynamo/eval_frame\.py$|torch/_compile\.py$"
)
# A data loader's own frames (PyTorch's, and Accelerate's around it: Trainer): the loop waiting
# for its next batch, wherever its own code called it from.
LOADER_FILE = re.compile(r"torch/utils/data/dataloader\.py$|accelerate/data_loader\.py$")
RUNTIME_MODULE = r"(?i)(^|/)(lib)?python[0-9.]*|libc\.so|libc-|ld-linux|\[vdso\]|libpthread|libstdc\+\+"
# The profiler's own code (its injection libraries, CUPTI), and frames it could not resolve.
PROFILER_MODULE = r"(?i)ToolsInjection|libcupti|libnvtx|nsys|QuadD"
# What PyTorch's emit_nvtx writes after an operator's name ("aten::mm, seq = 12, op_id = 3456")
TORCH_OP_ARGS = r", (seq|stashed seq|op_id|sizes|input_op_ids) = .*$"
UNRESOLVED = r"^(0x[0-9a-fA-F]+|\[.*\])$"
RUNNING = ["Running", "Uninterruptible"]
# CPython waits for the GIL in a condition wait; Python's own locks and queues wait on semaphores.
COND_WAIT = r"^pthread_cond_(timed)?wait"
# Python's own waiting frames, which a sampler may still call running.
PYTHON_WAITS = r"^(threading|queue|selectors)\.py:"


def idle_code(
    gaps: pl.DataFrame,
    calls: pl.DataFrame,
    py_samples: pl.DataFrame,
    py_frames: pl.DataFrame,
    cpu_samples: pl.DataFrame,
    cpu_frames: pl.DataFrame,
    nvtx: pl.DataFrame,
    strings: pl.DataFrame,
    os_calls: pl.DataFrame,
) -> pl.DataFrame:
    """gaps: the steady state's gaps (device_id, start, end, cpu_ns, setup_ns, tpid, ttid,
    after_readback);
    os_calls: the program's own OS runtime calls (start, end, pid, tid, name_id).
    Returns the idle_code table (tables.yaml)."""
    cols = pl.Schema(
        {
            "device_id": pl.Int32(),
            "part": pl.String(),
            "source": pl.String(),
            "name": pl.String(),
            "location": pl.String(),
            "caller": pl.String(),
            "entry": pl.String(),
            "samples": pl.Int64(),
            "ns": pl.Float64(),
            "share_pct": pl.Float64(),
        }
    )
    g = gaps.filter(((pl.col("cpu_ns") > 0) | (pl.col("setup_ns") > 0)) & pl.col("tpid").is_not_null())
    if g.height == 0:
        return pl.DataFrame(schema=cols)
    # (a gap after a large read-back is host-sampling's, and its code is told apart from the
    # other gaps': each finding names the code in its own gaps)
    g = g.with_columns(
        part=pl.when(pl.col("cpu_ns") < pl.col("setup_ns"))
        .then(pl.lit("setup"))
        .when(pl.col("after_readback"))
        .then(pl.lit("readback"))
        .otherwise(pl.lit("cpu")),
    ).with_columns(cpu_ns=pl.max_horizontal("cpu_ns", "setup_ns"))
    total = g.group_by("device_id", "part").agg(cpu_total=pl.col("cpu_ns").sum())
    parts = [
        _python(g, calls, py_samples, py_frames, strings),
        _native(g, calls, cpu_samples, cpu_frames, strings),
        _nvtx(g, nvtx),
        _os_calls(g, calls, os_calls, strings),
        _other_threads(g, calls, py_samples, py_frames, strings, os_calls),
    ]
    out = pl.concat([p for p in parts if p.height], how="diagonal_relaxed") if any(p.height for p in parts) else None
    if out is None:
        return pl.DataFrame(schema=cols)
    out = out.join(total, on=["device_id", "part"])
    if "samples" in out.columns:
        sampled = pl.col("samples").sum().over("device_id", "part", "source")
        out = out.filter(pl.col("samples").is_null() | (sampled >= MIN_SAMPLES))
    for c, t in (
        ("ns", pl.Float64),
        ("samples", pl.Int64),
        ("caller", pl.String),
        ("entry", pl.String),
        ("location", pl.String),
    ):
        if c not in out.columns:
            out = out.with_columns(pl.lit(None, t).alias(c))
    # Sampled rows: their share of the GPU's sampled stretches, as a share of its cpu time.
    out = out.with_columns(
        share=pl.when(pl.col("samples").is_not_null())
        .then(pl.col("samples") / pl.col("samples").sum().over("device_id", "part", "source"))
        .otherwise(pl.col("ns") / pl.col("cpu_total"))
    ).with_columns(
        ns=pl.coalesce(pl.col("ns"), pl.col("share") * pl.col("cpu_total")), share_pct=100.0 * pl.col("share")
    )
    rank = pl.col("source").replace_strict(
        {"python": 0, "native": 1, "nvtx": 2, "osrt": 3, "threads": 4}, return_dtype=pl.Int32
    )
    out = out.sort(
        [pl.col("device_id"), pl.col("part"), rank, pl.col("ns"), pl.col("name")],
        descending=[False, False, False, True, False],
    )
    return out.select(cols.names()).cast(cols)


def _in_cpu_time(s: pl.DataFrame, g: pl.DataFrame, calls: pl.DataFrame) -> pl.DataFrame:
    """The samples (time, pid, tid, ...) that fall in a gap's cpu time on the gap's thread,
    with the gap's device_id."""
    gg = g.select("device_id", "part", pid="tpid", tid="ttid", g0="start", g1="end").sort("g0")
    s = s.sort("time").join_asof(
        gg, left_on="time", right_on="g0", by=["pid", "tid"], strategy="backward", check_sortedness=False
    )
    s = s.filter(pl.col("g0").is_not_null() & (pl.col("time") < pl.col("g1")))
    if s.height == 0:
        return s
    c = calls.select("pid", "tid", c0="start", c1="end", after="after").sort("c0")
    s = s.sort("time").join_asof(
        c, left_on="time", right_on="c0", by=["pid", "tid"], strategy="backward", check_sortedness=False
    )
    outside = pl.col("c0").is_null() | (pl.col("time") >= pl.col("c1"))
    long = pl.col("after").is_null() | (pl.col("after") >= SHORT_CPU_NS)
    return s.filter(outside & long)


def _python(g, calls, samples, frames, strings) -> pl.DataFrame:
    if samples.height == 0:
        return pl.DataFrame()
    s = _in_cpu_time(samples.select("sample_id", "time", "pid", "tid"), g, calls)
    if s.height == 0:
        return pl.DataFrame()
    f = frames.join(s.select("sample_id", "device_id", "part"), on="sample_id", how="inner")
    f = f.join(strings.rename({"id": "function_id", "value": "function"}), on="function_id", how="left")
    f = f.join(strings.rename({"id": "file_id", "value": "file"}), on="file_id", how="left")
    # (nsys writes the frames' names and files HTML-escaped: "&lt;genexpr&gt;" is Python's
    # <genexpr>, and "&lt;frozen os&gt;" a frozen module, a library's, not the program's)
    f = f.with_columns(
        pl.col(c)
        .str.replace_all("&lt;", "<", literal=True)
        .str.replace_all("&gt;", ">", literal=True)
        .str.replace_all("&amp;", "&", literal=True)
        for c in ("function", "file")
    )
    f = f.with_columns(own=~pl.col("file").fill_null("").str.contains(LIBRARY_FILE.pattern))
    where = pl.col("file").fill_null("?").str.split("/").list.last() + ":" + pl.col("line").cast(pl.String)
    f = f.with_columns(where=where)
    leaf = f.filter(pl.col("depth") == 0).select(
        "sample_id", "device_id", "part", name="function", location="where", leaf_own="own"
    )
    own = (
        f.filter("own")
        .sort(["sample_id", "depth"])
        .unique("sample_id", keep="first")
        .select("sample_id", "depth", caller=pl.col("function") + " (" + pl.col("where") + ")")
    )
    # (the library call the caller made, by its path inside the library: the outermost
    # DataLoader frame when one is on the stack, else the outermost frame below the caller that
    # is no wrapper, else the one right below it)
    inside = pl.col("file").fill_null("?").str.replace(r"^.*(site|dist)-packages/", "")
    called = f.join(own.select("sample_id", below=pl.col("depth") - 1), on="sample_id")
    file = pl.col("file").fill_null("")
    called = called.filter(pl.col("depth") <= pl.col("below")).with_columns(
        kind=pl.when(file.str.contains(LOADER_FILE.pattern))
        .then(0)
        .when(~file.str.contains(WRAPPER_FILE.pattern) | (pl.col("depth") == 0))
        .then(1)
        .otherwise(2)
    )
    called = (
        called.sort(["sample_id", "kind", "depth"], descending=[False, False, True])
        .unique("sample_id", keep="first")
        .select("sample_id", entry=pl.col("function") + " (" + inside + ":" + pl.col("line").cast(pl.String) + ")")
    )
    leaf = (
        leaf.join(own.drop("depth"), on="sample_id", how="left")
        .join(called, on="sample_id", how="left")
        .with_columns(
            caller=pl.when(pl.col("leaf_own")).then(None).otherwise(pl.col("caller")),
            entry=pl.when(pl.col("leaf_own")).then(None).otherwise(pl.col("entry")),
        )
    )
    return (
        leaf.group_by("device_id", "part", "name", "location", "caller", "entry")
        .agg(samples=pl.len())
        .with_columns(source=pl.lit("python"))
    )


def _other_threads(g, calls, samples, frames, strings, os_calls) -> pl.DataFrame:
    """_python's rows for the samples of other threads running Python while a launching thread
    sat in a condition wait in its gaps' cpu time (taken as the launching thread's, to fall in
    its gaps)."""
    g = g.filter(pl.col("part") != "setup")
    if samples.height == 0 or os_calls.height == 0 or g.height == 0:
        return pl.DataFrame()
    # (a launching thread that runs no Python waits for no GIL: a C++ worker's condition wait)
    launching = (
        g.select(pid="tpid", tid="ttid").unique().join(samples.select("pid", "tid"), on=["pid", "tid"], how="semi")
    )
    names = strings.filter(pl.col("value").str.contains(COND_WAIT)).select(name_id="id")
    waits = (
        os_calls.join(names, on="name_id", how="semi")
        .join(launching, on=["pid", "tid"], how="semi")
        .select("pid", ttid="tid", w0="start", w1="end")
        .sort("pid", "ttid", "w0")
    )
    s = (
        # (as the sampler names the states: a thread in a blocking wait has let the GIL go)
        samples.filter(pl.col("state").is_in(RUNNING))
        .join(launching.rename({"tid": "ttid"}), on="pid")
        .filter(pl.col("tid") != pl.col("ttid"))
        .sort("pid", "ttid", "time")
        .join_asof(
            waits, left_on="time", right_on="w0", by=["pid", "ttid"], strategy="backward", check_sortedness=False
        )
        .filter(pl.col("w0").is_not_null() & (pl.col("time") < pl.col("w1")))
        .select("sample_id", "time", "pid", tid="ttid")
    )
    rows = _python(g, calls, s, frames, strings)
    if rows.height == 0:
        return rows
    return rows.filter(~pl.col("location").fill_null("").str.contains(PYTHON_WAITS)).with_columns(
        source=pl.lit("threads")
    )


def _native(g, calls, samples, frames, strings) -> pl.DataFrame:
    if samples.height == 0 or frames.height == 0:
        return pl.DataFrame()
    s = _in_cpu_time(samples.select("sample_id", "time", "pid", "tid"), g, calls)
    if s.height == 0:
        return pl.DataFrame()
    f = frames.join(s.select("sample_id", "device_id", "part"), on="sample_id", how="inner")
    f = f.join(strings.rename({"id": "symbol_id", "value": "symbol"}), on="symbol_id", how="left")
    f = f.join(strings.rename({"id": "module_id", "value": "module"}), on="module_id", how="left")
    f = f.filter(
        ~pl.col("module").fill_null("").str.contains(RUNTIME_MODULE)
        & ~pl.col("module").fill_null("").str.contains(PROFILER_MODULE)
        & ~pl.col("symbol").fill_null("").str.contains(UNRESOLVED)
    )
    top = f.sort(["sample_id", "depth"]).unique("sample_id", keep="first")
    return (
        top.group_by("device_id", "part", name="symbol", location=pl.col("module").str.split("/").list.last())
        .agg(samples=pl.len())
        .with_columns(source=pl.lit("native"), caller=pl.lit(None, pl.String))
    )


def _os_calls(g, calls, os_calls, strings) -> pl.DataFrame:
    """osrt: the OS calls in the gaps' cpu time, by name, each for its time within its gap."""
    if os_calls.height == 0:
        return pl.DataFrame()
    s = os_calls.select(
        "pid", "tid", "name_id", o0="start", o1="end", time=pl.col("start") + (pl.col("end") - pl.col("start")) // 2
    )
    s = _in_cpu_time(s, g, calls)
    if s.height == 0:
        return pl.DataFrame()
    s = s.join(strings.rename({"id": "name_id", "value": "name"}), on="name_id", how="left")
    within = pl.min_horizontal("o1", "g1") - pl.max_horizontal("o0", "g0")
    return (
        s.group_by("device_id", "part", name=pl.col("name").fill_null("?"))
        .agg(ns=within.sum().cast(pl.Float64))
        .with_columns(source=pl.lit("osrt"), samples=pl.lit(None, pl.Int64), caller=pl.lit(None, pl.String))
    )


def _nvtx(g, nvtx) -> pl.DataFrame:
    """nvtx: range_id, pid, tid, scope_tid, kind, depth, start, end, text (the program's ranges)."""
    if nvtx.height == 0:
        return pl.DataFrame()
    mid = g.select(
        "device_id",
        "part",
        "cpu_ns",
        pid="tpid",
        tid="ttid",
        t=pl.col("start") + (pl.col("end") - pl.col("start")) // 2,
    )
    mid = mid.with_columns(gid=pl.int_range(pl.len()))
    # A range that encloses most of the steady state (a whole run, one generate() call) names
    # nothing: only ranges shorter than half of it count.
    span = g.group_by("device_id").agg(span=pl.col("end").max() - pl.col("start").min())
    mid = mid.join(span, on="device_id")
    best = None
    for (kind, depth), r in nvtx.group_by("kind", "depth"):
        r = r.select("pid", "scope_tid", r0="start", r1="end", text="text").sort("r0")
        left = mid.with_columns(scope_tid=pl.col("tid") if kind == "push_pop" else pl.lit(0, pl.Int64))
        j = left.sort("t").join_asof(
            r, left_on="t", right_on="r0", by=["pid", "scope_tid"], strategy="backward", check_sortedness=False
        )
        j = j.filter(
            pl.col("r0").is_not_null()
            & (pl.col("t") <= pl.col("r1"))
            & (pl.col("r1") - pl.col("r0") < pl.col("span") / 2)
        ).select("gid", "text", d=pl.lit(depth, pl.Int64))
        best = j if best is None else pl.concat([best, j])
    if best is None or best.height == 0:
        return pl.DataFrame()
    inner = best.sort(["gid", "d"], descending=[False, True]).unique("gid", keep="first")
    j = mid.join(inner, on="gid", how="inner")
    # An operator range of PyTorch's emit_nvtx by the operator's name (as summary_nvtx), and
    # numbers that stand alone (layer_3, chunk 12) as #, not those inside a word (h2d).
    name = pl.col("text").fill_null("").str.replace(TORCH_OP_ARGS, "")
    name = name.str.replace_all(r"(^|[^A-Za-z0-9])[0-9]+", "${1}#")
    return (
        j.group_by("device_id", "part", name=name)
        .agg(ns=pl.col("cpu_ns").sum().cast(pl.Float64), location=pl.col("text").first())
        .with_columns(source=pl.lit("nvtx"), samples=pl.lit(None, pl.Int64), caller=pl.lit(None, pl.String))
    )
