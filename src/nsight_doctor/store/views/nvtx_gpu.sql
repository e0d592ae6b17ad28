-- nvtx_gpu: GPU work projected onto NVTX ranges. A GPU operation belongs to every range that
-- was open on the launching thread (push/pop ranges) or process (start/end ranges) when the
-- CPU issued it, so nested ranges each count it.
--
-- range_id: id of the range.
-- text: the range's message.
-- domain: NVTX domain (NULL for the default domain).
-- library: whether a library opened it around its own work (see nvtx_ranges).
-- pid: operating-system process id of the thread that opened it.
-- kind: push_pop or start_end.
-- depth: nesting depth (see nvtx_ranges).
-- start: range start on the CPU, ns.
-- end: range end on the CPU, ns.
-- duration: end - start, ns.
-- gpu_ops: GPU operations issued inside the range.
-- gpu_time: sum of their durations, ns.
-- gpu_start: start of the first of them on the GPU, ns.
-- gpu_end: end of the last of them on the GPU, ns.
CREATE VIEW nvtx_gpu AS
SELECT r.range_id, r.text, r.domain, r.library, r.pid, r.kind, r.depth, r.start, r."end", r.duration,
       coalesce(g.gpu_ops, 0) AS gpu_ops, coalesce(g.gpu_time, 0) AS gpu_time,
       g.gpu_start, g.gpu_end
FROM nvtx_ranges_t r
LEFT JOIN (SELECT range_id, sum(gpu_ops) AS gpu_ops, sum(gpu_time) AS gpu_time, min(gpu_start) AS gpu_start,
                  max(gpu_end) AS gpu_end
           FROM nvtx_gpu_t GROUP BY range_id) g ON g.range_id = r.range_id;
