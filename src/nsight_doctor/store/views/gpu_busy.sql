-- gpu_busy: the union of GPU operations per device: maximal intervals in which at least one
-- operation ran, so that concurrent work is counted once.
--
-- device_id: CUDA device id.
-- start: interval start, ns.
-- end: interval end, ns.
-- duration: end - start, ns.
-- ops: operations that started in the interval.
-- first_correlation_id: correlation id of the interval's first operation.
-- first_pid: process of the interval's first operation.
-- first_name: name of the interval's first operation.
-- first_kind: kind of the interval's first operation (kernel, graph, memcpy, memset).
-- last_correlation_id: correlation id of the operation that ended last in the interval.
-- last_pid: the process of that operation.
CREATE TABLE _copy_directions AS
SELECT direction, row_number() OVER (ORDER BY direction) AS id FROM (SELECT DISTINCT direction FROM base_memcpy);

CREATE TABLE _gpu_busy_ids AS
WITH ops AS (
    -- Names as numbers (kind, and a string id or a copy direction's number), spelled out once
    -- per interval below: strings carried through the windows and aggregates of millions of
    -- rows cost about a fifth of the memory (bench/make_large_profile.py). A table, so that the
    -- join below knows how many intervals there are.
    SELECT device_id, start, "end", correlation_id, pid, 0 AS kind, short_name_id AS name_id FROM base_kernels
    UNION ALL
    SELECT device_id, start, "end", correlation_id, pid, 1, graph_id FROM base_graph_launches
    UNION ALL
    SELECT device_id, start, "end", correlation_id, pid, 2, d.id
    FROM base_memcpy m LEFT JOIN _copy_directions d ON d.direction = m.direction
    UNION ALL
    SELECT device_id, start, "end", correlation_id, pid, 3, NULL FROM base_memset
), o AS (
    SELECT *, max("end") OVER (PARTITION BY device_id ORDER BY start, "end"
                               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
    FROM ops
), g AS (
    SELECT *, sum(CASE WHEN prev_end IS NULL OR start > prev_end THEN 1 ELSE 0 END)
              OVER (PARTITION BY device_id ORDER BY start, "end" ROWS UNBOUNDED PRECEDING) AS island
    FROM o
)
SELECT device_id, min(start) AS start, max("end") AS "end", count(*) AS ops,
       arg_min({'corr': correlation_id, 'pid': pid, 'kind': kind, 'name_id': name_id}, start) AS first,
       arg_max({'corr': correlation_id, 'pid': pid}, "end") AS last
FROM g GROUP BY device_id, island;

CREATE TABLE gpu_busy AS
SELECT b.device_id, b.start, b."end", b."end" - b.start AS duration, b.ops,
       b.first.corr AS first_correlation_id, b.first.pid AS first_pid,
       -- (the names gpu_ops gives)
       CASE b.first.kind WHEN 0 THEN s.value WHEN 1 THEN 'graph ' || coalesce(b.first.name_id::VARCHAR, '?')
            WHEN 2 THEN d.direction ELSE 'memset' END AS first_name,
       CASE b.first.kind WHEN 0 THEN 'kernel' WHEN 1 THEN 'graph' WHEN 2 THEN 'memcpy' ELSE 'memset' END AS first_kind,
       b.last.corr AS last_correlation_id, b.last.pid AS last_pid
FROM _gpu_busy_ids b
LEFT JOIN base_strings s ON s.id = CASE WHEN b.first.kind = 0 THEN b.first.name_id END
LEFT JOIN _copy_directions d ON d.id = CASE WHEN b.first.kind = 2 THEN b.first.name_id END;
DROP TABLE _gpu_busy_ids;
DROP TABLE _copy_directions;
