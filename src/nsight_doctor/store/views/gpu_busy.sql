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
CREATE TABLE gpu_busy AS
WITH o AS (
    SELECT device_id, start, "end", correlation_id, pid, name, kind,
           max("end") OVER (PARTITION BY device_id ORDER BY start, "end"
                            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
    FROM gpu_ops
), g AS (
    SELECT *, sum(CASE WHEN prev_end IS NULL OR start > prev_end THEN 1 ELSE 0 END)
              OVER (PARTITION BY device_id ORDER BY start, "end" ROWS UNBOUNDED PRECEDING) AS island
    FROM o
)
SELECT device_id, min(start) AS start, max("end") AS "end", max("end") - min(start) AS duration,
       count(*) AS ops,
       arg_min(correlation_id, start) AS first_correlation_id,
       arg_min(pid, start) AS first_pid,
       arg_min(name, start) AS first_name,
       arg_min(kind, start) AS first_kind,
       arg_max(correlation_id, "end") AS last_correlation_id,
       arg_max(pid, "end") AS last_pid
FROM g GROUP BY device_id, island;
