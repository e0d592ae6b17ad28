-- summary_nvtx: GPU time projected onto NVTX ranges (nvtx_gpu), by text and domain, most GPU
-- time first. PyTorch's operator ranges (`torch.autograd.profiler.emit_nvtx`: "aten::mm, seq =
-- 12, op_id = 3456, sizes = [...]") go by the operator's name: each instance's text is its own
-- (the pattern is timeline/code.py's TORCH_OP_ARGS, for the code named in the idle gaps).
-- Start/end ranges of one text that overlap in their process (a range per request) count
-- their time once.
--
-- text: the range's message (an operator range's name alone).
-- domain: NVTX domain (NULL for the default domain).
-- count: ranges.
-- processes: processes that opened them (one per rank in a multi-process capture).
-- cpu_ns: their total length on the CPU (start/end ranges that overlap: the time one of them
--   was open), summed over processes, ns.
-- cpu_ns_per_process: cpu_ns / processes, ns.
-- gpu_ns: GPU time of the operations issued inside them (once each, where start/end ranges
--   overlap), ns.
-- gpu_ops: those operations.
-- median_gpu_span_ns: median, over the ranges, of the span from their first operation's start to their last one's end on the GPU, ns.
CREATE VIEW summary_nvtx AS
WITH r AS (
    SELECT regexp_replace(text, ', (seq|stashed seq|op_id|sizes|input_op_ids) = .*$', '') AS text,
           domain, pid, kind, start, "end", duration, gpu_time, gpu_ops, gpu_end - gpu_start AS gpu_span
    FROM nvtx_gpu
), o AS (
    -- Start/end ranges (few): those of one text may overlap in their process
    SELECT text, domain, pid, start, "end",
           max("end") OVER (PARTITION BY text, domain, pid ORDER BY start, "end"
                            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS open_until
    FROM r WHERE kind = 'start_end'
), stretch AS MATERIALIZED (
    -- their stretches of ranges that overlap, and whether any of the text's do
    SELECT text, domain, pid, min(start) AS s, max("end") AS e, bool_or(bool_or(start <= open_until)) OVER (PARTITION BY text, domain) AS overlapping
    FROM (SELECT *, sum(CASE WHEN open_until IS NULL OR start > open_until THEN 1 ELSE 0 END)
                        OVER (PARTITION BY text, domain, pid ORDER BY start, "end" ROWS UNBOUNDED PRECEDING) AS n
          FROM o)
    GROUP BY text, domain, pid, n
), hit AS (
    -- For a text whose start/end ranges overlap, the calls made while one was open: each
    -- call's stretch of the text begun last before it, if it had not ended (an as-of join: a
    -- text's stretches in a process do not overlap; a range join compared every call with
    -- every stretch). The calls are read only where some text's ranges overlap.
    SELECT DISTINCT r.text, r.domain, a.pid, a.correlation_id
    FROM (SELECT pid, start, correlation_id FROM api_calls
          WHERE correlation_id IS NOT NULL AND (SELECT count(*) FROM stretch WHERE overlapping) > 0) a
    JOIN (SELECT DISTINCT text, coalesce(domain, '') AS dkey, pid FROM stretch WHERE overlapping) t ON t.pid = a.pid
    ASOF JOIN (SELECT *, coalesce(domain, '') AS dkey FROM stretch WHERE overlapping) r
      ON r.pid = a.pid AND r.text = t.text AND r.dkey = t.dkey AND a.start >= r.s
    WHERE a.start <= r.e
), once AS (
    -- their operations, each once
    SELECT h.text, h.domain, count(*) AS gpu_ops, sum(o.duration) AS gpu_ns
    FROM hit h JOIN gpu_ops o ON o.pid = h.pid AND o.correlation_id = h.correlation_id
    GROUP BY ALL
), merged AS (
    -- the time one of a text's start/end ranges was open, per process, summed
    SELECT text, domain, sum(e - s) AS cpu_ns FROM stretch GROUP BY ALL
), by_text AS (
    SELECT text, domain, count(*) AS count, count(DISTINCT pid) AS processes,
           sum(duration) FILTER (WHERE kind = 'push_pop') AS pp_cpu,
           sum(gpu_time) FILTER (WHERE kind = 'push_pop') AS pp_gpu, sum(gpu_time) FILTER (WHERE kind = 'start_end') AS se_gpu,
           sum(gpu_ops) FILTER (WHERE kind = 'push_pop') AS pp_ops, sum(gpu_ops) FILTER (WHERE kind = 'start_end') AS se_ops,
           median(gpu_span) AS median_gpu_span_ns
    FROM r GROUP BY ALL
)
SELECT t.text, t.domain, t.count, t.processes, x.cpu_ns, x.cpu_ns / t.processes AS cpu_ns_per_process,
       x.gpu_ns, x.gpu_ops, t.median_gpu_span_ns
FROM by_text t
LEFT JOIN once ON once.text = t.text AND once.domain IS NOT DISTINCT FROM t.domain
LEFT JOIN merged m ON m.text = t.text AND m.domain IS NOT DISTINCT FROM t.domain,
LATERAL (SELECT coalesce(t.pp_cpu, 0) + coalesce(m.cpu_ns, 0) AS cpu_ns,
                coalesce(t.pp_gpu, 0) + coalesce(once.gpu_ns, t.se_gpu, 0) AS gpu_ns,
                coalesce(t.pp_ops, 0) + coalesce(once.gpu_ops, t.se_ops, 0) AS gpu_ops) x
ORDER BY gpu_ns DESC NULLS LAST, cpu_ns DESC, text;
