-- profiler_overhead: time nsys itself spent on the profiled threads (e.g. buffer flushes).
--
-- start: start, ns.
-- end: end, ns.
-- duration: end - start, ns.
-- pid: operating-system process id.
-- tid: thread id.
-- name: what the profiler was doing.
CREATE VIEW profiler_overhead AS
SELECT o.start, o."end", o."end" - o.start AS duration,
       o.pid, o.tid, s.value AS name
FROM base_profiler_overhead o LEFT JOIN base_strings s ON s.id = o.name_id;
