-- gpu_gaps: idle intervals of each GPU between two busy intervals (gpu_busy), with what the
-- CPU was doing, so that each gap gets one cause.
--
-- device_id: CUDA device id.
-- start: gap start (the GPU went idle), ns.
-- end: gap end (the next operation started), ns.
-- duration: end - start, ns.
-- pid: process that issued the operation that ended the gap.
-- next_op: name of the operation that ended the gap.
-- next_kind: its kind: kernel, graph, memcpy or memset.
-- launch_name: the API call that issued it (NULL when not traced).
-- launch_start: when that call began on the CPU, ns.
-- launch_end: when that call returned, ns.
-- blocking_name: the blocking call (blocking_calls) that returned during the gap, if any.
-- blocking_end: when it returned, ns.
-- api_ns: CPU time, within the gap, inside CUDA API calls other than launches, ns (computed
--   for gaps of 100 us or more, NULL for shorter ones).
-- cause: queued (the next operation was already issued: GPU-side dependency or latency),
--   sync (the CPU was blocked in a synchronizing call that returned during the gap, so the
--   GPU drained and waited for the CPU to refill it), launch (a gap under 100 us before a
--   late launch: per-operation CPU overhead of the framework and the launch call), api (a
--   longer gap, at least half of it inside other CUDA API calls: allocation, module
--   loading, ...), cpu (a longer gap with little CUDA activity: CPU work outside CUDA).
CREATE TABLE gpu_gaps AS
WITH b AS (
    SELECT device_id, start, "end",
           lead(start) OVER w AS next_start,
           lead(first_correlation_id) OVER w AS next_corr,
           lead(first_pid) OVER w AS next_pid,
           lead(first_name) OVER w AS next_name,
           lead(first_kind) OVER w AS next_kind
    FROM gpu_busy WINDOW w AS (PARTITION BY device_id ORDER BY start)
), g AS (
    SELECT device_id, "end" AS start, next_start AS "end", next_start - "end" AS duration,
           next_corr, next_pid AS pid, next_name AS next_op, next_kind
    FROM b WHERE next_start IS NOT NULL
), l AS (
    SELECT g.*, a.name AS launch_name, a.start AS launch_start, a."end" AS launch_end
    FROM g LEFT JOIN api_calls a ON a.correlation_id = g.next_corr AND a.pid = g.pid
), k AS MATERIALIZED (
    SELECT l.*, c.name AS blocking_name, c."end" AS blocking_end
    FROM l ASOF LEFT JOIN blocking_calls c ON c.pid = l.pid AND l."end" >= c."end"
), other_api AS (
    SELECT pid, start, "end",
           max("end") OVER (PARTITION BY pid ORDER BY start, "end"
                            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
    FROM api_calls WHERE category NOT IN ('launch', 'graph_launch')
), islands AS (
    SELECT pid, min(start) AS start, max("end") AS "end"
    FROM (SELECT *, sum(CASE WHEN prev_end IS NULL OR start > prev_end THEN 1 ELSE 0 END)
                    OVER (PARTITION BY pid ORDER BY start, "end" ROWS UNBOUNDED PRECEDING) AS island
          FROM other_api)
    GROUP BY pid, island
), cover AS (
    -- covered(t) = cum_before + min(max(t - start, 0), end - start) for the last island
    -- that starts at or before t: CPU time inside API calls up to t.
    SELECT pid, start, "end",
           coalesce(sum("end" - start) OVER (PARTITION BY pid ORDER BY start
                    ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS cum_before
    FROM islands
), long_gaps AS (
    -- API time matters only for gaps of 100 us or more (shorter ones are launch gaps).
    SELECT device_id, start, "end", pid FROM k WHERE duration >= 100000
), c1 AS (
    SELECT g.*, c.cum_before + least(greatest(g."end" - c.start, 0), c."end" - c.start) AS cov_end
    FROM long_gaps g ASOF LEFT JOIN cover c ON c.pid = g.pid AND g."end" >= c.start
), c2 AS (
    SELECT c1.device_id, c1.start,
           coalesce(cov_end, 0)
           - coalesce(c.cum_before + least(greatest(c1.start - c.start, 0), c."end" - c.start), 0) AS api_ns
    FROM c1 ASOF LEFT JOIN cover c ON c.pid = c1.pid AND c1.start >= c.start
)
SELECT k.device_id, k.start, k."end", k.duration, k.pid, k.next_op, k.next_kind, k.launch_name,
       k.launch_start, k.launch_end,
       CASE WHEN k.blocking_end >= k.start THEN k.blocking_name END AS blocking_name,
       CASE WHEN k.blocking_end >= k.start THEN k.blocking_end END AS blocking_end,
       c2.api_ns,
       CASE
           WHEN k.launch_end IS NOT NULL AND k.launch_end <= k.start THEN 'queued'
           WHEN k.blocking_end >= k.start THEN 'sync'
           WHEN k.duration < 100000 THEN 'launch'
           WHEN 2 * c2.api_ns >= k.duration THEN 'api'
           ELSE 'cpu'
       END AS cause
FROM k LEFT JOIN c2 ON c2.device_id = k.device_id AND c2.start = k.start;
