-- NVTX ranges with their nesting depth, materialized for the projection.
CREATE TABLE nvtx_ranges_t AS
WITH doms AS (
    SELECT n.domain_id, any_value(coalesce(n.text, s.value)) AS domain
    FROM base_nvtx n LEFT JOIN base_strings s ON s.id = n.text_id
    WHERE n.event_type = 75 GROUP BY n.domain_id
), r AS (
    SELECT row_number() OVER () AS range_id,
           n.start, n."end", n."end" - n.start AS duration, n.global_tid,
           (n.global_tid >> 24) & 16777215 AS pid, n.global_tid & 16777215 AS tid,
           coalesce(n.text, s.value) AS text, d.domain,
           CASE n.event_type WHEN 59 THEN 'push_pop' ELSE 'start_end' END AS kind
    FROM base_nvtx n
    LEFT JOIN base_strings s ON s.id = n.text_id
    LEFT JOIN doms d ON d.domain_id = n.domain_id AND n.domain_id <> 0
    WHERE n.event_type IN (59, 60) AND n."end" IS NOT NULL AND n."end" >= n.start
), ev AS (
    -- +1 when a range opens, -1 when it closes; ends sort before starts at the same time,
    -- except the end of an empty range, which follows its own start.
    SELECT range_id, kind, CASE WHEN kind = 'push_pop' THEN global_tid ELSE pid END AS key,
           start AS t, 1 AS d, 1 AS ord FROM r
    UNION ALL
    SELECT range_id, kind, CASE WHEN kind = 'push_pop' THEN global_tid ELSE pid END,
           "end", -1, CASE WHEN duration > 0 THEN 0 ELSE 2 END FROM r
), run AS (
    SELECT range_id, d,
           sum(d) OVER (PARTITION BY kind, key ORDER BY t, ord, range_id ROWS UNBOUNDED PRECEDING) - d AS depth
    FROM ev
)
SELECT r.range_id, r.start, r."end", r.duration, r.global_tid, r.pid, r.tid, r.text, r.domain,
       r.kind, greatest(run.depth, 0)::INTEGER AS depth
FROM r JOIN run ON run.range_id = r.range_id AND run.d = 1;

-- GPU work projected onto NVTX ranges: an operation belongs to every range that was open on
-- the launching thread (push/pop) or process (start/end) when its API call began.
CREATE TABLE nvtx_gpu_t AS
WITH launches AS (
    SELECT o.device_id, o.start, o."end", o.duration, a.global_tid, a.pid, a.start AS t
    FROM gpu_ops o
    JOIN (SELECT correlation_id, global_tid, (global_tid >> 24) & 16777215 AS pid, start
          FROM base_api_calls) a
      ON a.correlation_id = o.correlation_id AND a.pid = o.pid
), levels AS (
    SELECT DISTINCT kind, CASE WHEN kind = 'push_pop' THEN global_tid ELSE pid END AS key, depth
    FROM nvtx_ranges_t
), keyed AS (
    SELECT l.*, v.kind, v.depth, v.key
    FROM launches l JOIN levels v
      ON v.key = CASE WHEN v.kind = 'push_pop' THEN l.global_tid ELSE l.pid END
), ranges AS (
    SELECT range_id, kind, depth, start, "end",
           CASE WHEN kind = 'push_pop' THEN global_tid ELSE pid END AS key
    FROM nvtx_ranges_t
), m AS (
    SELECT keyed.*, r.range_id, r."end" AS r_end
    FROM keyed ASOF JOIN ranges r
      ON r.kind = keyed.kind AND r.key = keyed.key AND r.depth = keyed.depth AND keyed.t >= r.start
)
SELECT range_id, count(*) AS gpu_ops, sum(duration) AS gpu_time, min(start) AS gpu_start,
       max("end") AS gpu_end
FROM m WHERE t <= r_end GROUP BY range_id;
