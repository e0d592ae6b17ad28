-- steps: the steps (forward passes) of each GPU's timeline, found without help where the
-- capture has no step annotations. Sources, tried in order per GPU:
-- 1. nvtx: a repeated NVTX range that marks steps: a serving engine's own (vLLM
--    execute_context_N(T)_generation_N(T), TensorRT-LLM "[Executor] _forward_step", SGLang
--    scheduler.run_batch), else a user range whose name says step, decode, prefill, forward,
--    iteration or batch, else the outermost repeated range with GPU work; digits in names are
--    ignored (layer_3_forward is layer_#_forward); a library's own ranges (nvtx_ranges.library)
--    never. It must cover at least half of the GPU's kernel time (a fifth for an engine's own
--    ranges).
-- 2. anchor: the shape of the work: a kernel (name and launch configuration) or CUDA graph that
--    recurs once per step: among the operations that recur at least 4 times at a regular stride
--    (the same number of kernels and graphs between occurrences, within 25%, for 70% of them)
--    across at least half of the GPU's kernels and graphs, those recurring about as rarely as the rarest (within
--    25%), and of these the most regular and then the one with the most GPU time. In a
--    transformer this is the vocabulary projection (lm_head), or the step's CUDA graph.
-- The steps partition the span from the first step's start to the last one's end.
--
-- device_id: CUDA device id.
-- step: step number on this GPU, from 1.
-- start: step start, ns.
-- end: step end (the next step's start, or for the last step its own end), ns.
-- duration: end - start: the step time, ns (for decode, the time per output token).
-- source: nvtx or anchor.
-- marker: what marks the steps: the NVTX range name (digits as #) or the anchor operation.
-- kind_hint: prefill, decode or mixed when the step's NVTX range says so, else NULL.
-- ops: GPU operations that started in the step.
-- busy_ns: GPU busy time in the step (gpu_busy clipped to it), ns.
CREATE TABLE steps AS
WITH tot AS (
    SELECT device_id, sum(duration) FILTER (WHERE kind IN ('kernel', 'graph')) AS kernel_ns, count(*) AS ops
    FROM gpu_ops GROUP BY device_id
), nv AS (
    SELECT g.device_id, r.range_id, r.depth, r.text, g.gpu_start, g.gpu_end, g.gpu_time,
           regexp_replace(coalesce(r.text, ''), '[0-9]+', '#', 'g') AS pattern
    FROM nvtx_ranges_t r JOIN nvtx_gpu_t g USING (range_id)
    -- (a library's ranges around its own work, such as NCCL's collectives, do not mark steps)
    WHERE g.gpu_ops > 0 AND NOT r.library
), nv_pat AS (
    SELECT device_id, pattern, count(*) AS n, min(depth) AS depth, sum(gpu_time) AS gpu_time,
           CASE WHEN regexp_matches(pattern, '^execute_context_#\(#\)_generation_#\(#\)$|^\[Executor\] _forward_step|^scheduler\.run_batch$') THEN 0
                WHEN regexp_matches(lower(pattern), '(^|[^a-z])(step|decode|prefill|forward|iter|iteration|batch)([^a-z]|$)') THEN 1
                ELSE 2 END AS priority
    FROM nv GROUP BY device_id, pattern HAVING count(*) >= 3
), nv_pick AS (
    SELECT p.device_id, arg_min(p.pattern, (p.priority, p.depth, -p.gpu_time)) AS pattern
    FROM nv_pat p JOIN tot USING (device_id)
    WHERE p.gpu_time >= CASE WHEN p.priority = 0 THEN 0.2 ELSE 0.5 END * tot.kernel_ns
    GROUP BY p.device_id
), nv_steps AS (
    SELECT nv.device_id, nv.gpu_start AS s, nv.gpu_end AS e, nv.pattern AS marker, nv.text
    FROM nv JOIN nv_pick USING (device_id, pattern)
), ops AS (
    -- Kernels and graph executions, numbered per GPU, with the signature that recurs: a hash
    -- of the name and launch dimensions (cheaper to sort and group than their text, which
    -- anchor_label spells out for the anchor alone).
    SELECT device_id, start, "end", hash(name, grid_x, grid_y, grid_z, block_x, block_y, block_z) AS sig
    FROM kernels
    UNION ALL
    SELECT device_id, start, "end", hash('graph', graph_id) FROM graph_launches
), numbered AS (
    SELECT *, row_number() OVER (PARTITION BY device_id ORDER BY start, "end") AS idx FROM ops
), sig_n AS (
    SELECT device_id, sig, count(*) AS n FROM numbered GROUP BY ALL HAVING count(*) >= 4
), strides AS (
    SELECT o.device_id, o.sig, o.idx, o.start, o."end",
           o.idx - lag(o.idx) OVER (PARTITION BY o.device_id, o.sig ORDER BY o.idx) AS stride
    FROM numbered o SEMI JOIN sig_n USING (device_id, sig)
), sig_stats AS (
    SELECT device_id, sig, count(*) AS n, median(stride) AS med, min(idx) AS first_idx, max(idx) AS last_idx,
           sum("end" - start) AS total_ns
    FROM strides GROUP BY ALL
), nkern AS (
    SELECT device_id, max(idx) AS ops FROM numbered GROUP BY device_id
), regular AS (
    SELECT s.device_id, s.sig, s.n, s.med, s.total_ns,
           round(count(*) FILTER (WHERE abs(t.stride - s.med) <= 0.25 * s.med) / (s.n - 1), 2) AS frac
    FROM sig_stats s JOIN strides t USING (device_id, sig) JOIN nkern USING (device_id)
    WHERE s.last_idx - s.first_idx >= 0.5 * nkern.ops
    GROUP BY s.device_id, s.sig, s.n, s.med, s.total_ns
    HAVING count(*) FILTER (WHERE abs(t.stride - s.med) <= 0.25 * s.med) >= 0.7 * (s.n - 1)
), least_n AS (
    SELECT device_id, min(n) AS n FROM regular GROUP BY device_id
), anchor AS (
    -- Among the regular operations recurring about as rarely as the rarest one (within 25%):
    -- a nearly perfectly regular one first, then the one with the most GPU time (the vocabulary
    -- projection rather than a small bookkeeping kernel of the same loop).
    SELECT r.device_id, arg_max(r.sig, (r.frac >= 0.9, r.total_ns, r.n)) AS sig,
           arg_max(r.med, (r.frac >= 0.9, r.total_ns, r.n)) AS med
    FROM regular r JOIN least_n l USING (device_id)
    WHERE r.n <= 1.25 * l.n AND r.device_id NOT IN (SELECT device_id FROM nv_pick)
    GROUP BY r.device_id
), occ AS (
    SELECT t.device_id, t.idx, t.start, t."end", a.sig, a.med,
           row_number() OVER (PARTITION BY t.device_id ORDER BY t.idx) AS k
    FROM strides t JOIN anchor a USING (device_id, sig)
), first_start AS (
    -- The first step starts one stride of operations before the first occurrence.
    SELECT o.device_id, min(n.start) AS s
    FROM occ o JOIN numbered n ON n.device_id = o.device_id
         AND n.idx BETWEEN o.idx - o.med + 1 AND o.idx
    WHERE o.k = 1 GROUP BY o.device_id
), anchor_label AS (
    -- The anchor's name and launch dimensions, from its first occurrence.
    SELECT o.device_id,
           any_value(k.name || '<<<(' || k.grid_x || ',' || k.grid_y || ',' || k.grid_z || '),('
                     || k.block_x || ',' || k.block_y || ',' || k.block_z || ')>>>') AS label
    FROM occ o JOIN kernels k ON k.device_id = o.device_id AND k.start = o.start
         AND hash(k.name, k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z) = o.sig
    WHERE o.k = 1 GROUP BY o.device_id
    UNION ALL
    SELECT o.device_id, any_value('graph ' || coalesce(g.graph_id::VARCHAR, '?'))
    FROM occ o JOIN graph_launches g ON g.device_id = o.device_id AND g.start = o.start AND hash('graph', g.graph_id) = o.sig
    WHERE o.k = 1 GROUP BY o.device_id
), anchor_steps AS (
    SELECT o.device_id,
           coalesce(lag(o."end") OVER (PARTITION BY o.device_id ORDER BY o.k), f.s) AS s,
           o."end" AS e, l.label AS marker, NULL::VARCHAR AS text
    FROM occ o JOIN first_start f USING (device_id) LEFT JOIN anchor_label l USING (device_id)
), all_steps AS (
    SELECT device_id, s, e, marker, text, 'nvtx' AS source FROM nv_steps
    UNION ALL
    SELECT device_id, s, e, marker, text, 'anchor' FROM anchor_steps
), ordered AS (
    SELECT *, row_number() OVER (PARTITION BY device_id ORDER BY s, e) AS step,
           lead(s) OVER (PARTITION BY device_id ORDER BY s, e) AS next_s
    FROM all_steps
), bounded AS (
    SELECT device_id, step, s AS start,
           CASE WHEN source = 'nvtx' THEN coalesce(greatest(next_s, e), e) ELSE e END AS "end",
           source, marker,
           CASE WHEN regexp_matches(text, '^execute_context_[0-9]+\([0-9]+\)_generation_[0-9]+\([0-9]+\)$') THEN
                    CASE WHEN regexp_extract(text, '^execute_context_([0-9]+)', 1)::INTEGER = 0 THEN 'decode'
                         WHEN regexp_extract(text, '_generation_([0-9]+)', 1)::INTEGER = 0 THEN 'prefill'
                         ELSE 'mixed' END
                WHEN regexp_matches(text, '_forward_step.*: [0-9]+ ctx reqs.* [0-9]+ gen reqs') THEN
                    CASE WHEN regexp_extract(text, ': ([0-9]+) ctx reqs', 1)::INTEGER = 0 THEN 'decode'
                         WHEN regexp_extract(text, ' ([0-9]+) gen reqs', 1)::INTEGER = 0 THEN 'prefill'
                         ELSE 'mixed' END
                WHEN regexp_matches(lower(text), 'prefill|extend|context') THEN 'prefill'
                WHEN regexp_matches(lower(text), 'decode|generation') THEN 'decode'
           END AS kind_hint
    FROM ordered
), busy_before AS (
    -- Busy time and operations before a point as running totals, so that a step's share is a
    -- difference of two ASOF lookups (a join of steps with intervals on device_id compares
    -- every step with every interval of the GPU: 50 s for 2 M kernels). gpu_busy's intervals
    -- do not overlap.
    SELECT device_id, start, "end",
           coalesce(sum("end" - start) OVER (PARTITION BY device_id ORDER BY start
                    ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before
    FROM gpu_busy
), ops_before AS (
    -- ops: the operations that start at or before start.
    SELECT device_id, start, sum(count(*)) OVER (PARTITION BY device_id ORDER BY start) AS ops
    FROM gpu_ops GROUP BY device_id, start
), points AS (
    -- Each step's start and end: one lookup per point in each running total (each lookup
    -- sorts the totals' millions of rows).
    SELECT DISTINCT device_id, t FROM (SELECT device_id, start AS t FROM bounded UNION ALL SELECT device_id, "end" FROM bounded)
), busy_at AS MATERIALIZED (
    -- Busy time before t.
    SELECT p.device_id, p.t, coalesce(b.before + least(greatest(p.t - b.start, 0), b."end" - b.start), 0) AS busy
    FROM points p ASOF LEFT JOIN busy_before b ON b.device_id = p.device_id AND p.t >= b.start
), ops_at AS MATERIALIZED (
    -- Operations that start before t.
    SELECT p.device_id, p.t, coalesce(o.ops, 0) AS ops
    FROM points p ASOF LEFT JOIN ops_before o ON o.device_id = p.device_id AND p.t > o.start
)
SELECT s.device_id, s.step, s.start, s."end", s."end" - s.start AS duration, s.source, s.marker,
       s.kind_hint, oe.ops - os.ops AS ops, be.busy - bs.busy AS busy_ns
FROM bounded s
JOIN busy_at bs ON bs.device_id IS NOT DISTINCT FROM s.device_id AND bs.t = s.start
JOIN busy_at be ON be.device_id IS NOT DISTINCT FROM s.device_id AND be.t = s."end"
JOIN ops_at os ON os.device_id IS NOT DISTINCT FROM s.device_id AND os.t = s.start
JOIN ops_at oe ON oe.device_id IS NOT DISTINCT FROM s.device_id AND oe.t = s."end"
ORDER BY s.device_id, s.step;
