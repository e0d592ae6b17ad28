-- NVTX ranges with their nesting depth, materialized for the projection.
CREATE TABLE nvtx_ranges_t AS
WITH doms AS (
    SELECT domain_id, any_value(name) AS domain FROM base_nvtx_domains GROUP BY domain_id
), r AS (
    SELECT row_number() OVER () AS range_id,
           n.start, n."end", n."end" - n.start AS duration, n.pid, n.tid,
           coalesce(n.text, s.value) AS text, d.domain,
           -- Ranges that libraries open around their own work (nvtx_ranges.library).
           coalesce(d.domain IN ('CCCL', 'NCCL', 'cuBLAS', 'cuDNN'), false) AS library, n.kind,
           -- Push/pop ranges nest per thread, start/end ranges per process (scope_tid 0).
           CASE WHEN n.kind = 'push_pop' THEN n.tid ELSE 0 END AS scope_tid
    FROM base_nvtx n
    LEFT JOIN base_strings s ON s.id = n.text_id
    LEFT JOIN doms d ON d.domain_id = n.domain_id
    WHERE n.kind IN ('push_pop', 'start_end') AND n."end" IS NOT NULL AND n."end" >= n.start
), ev AS (
    -- +1 when a range opens, -1 when it closes; ends sort before starts at the same time,
    -- except the end of an empty range, which follows its own start.
    SELECT range_id, kind, pid, scope_tid, start AS t, 1 AS d, 1 AS ord FROM r
    UNION ALL
    SELECT range_id, kind, pid, scope_tid, "end", -1, CASE WHEN duration > 0 THEN 0 ELSE 2 END FROM r
), run AS (
    SELECT range_id, d,
           sum(d) OVER (PARTITION BY kind, pid, scope_tid ORDER BY t, ord, range_id ROWS UNBOUNDED PRECEDING) - d AS depth
    FROM ev
)
SELECT r.range_id, r.start, r."end", r.duration, r.pid, r.tid, r.text, r.domain, r.library,
       r.kind, greatest(run.depth, 0)::INTEGER AS depth, r.scope_tid
FROM r JOIN run ON run.range_id = r.range_id AND run.d = 1;
