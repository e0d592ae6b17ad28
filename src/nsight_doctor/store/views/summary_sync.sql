-- summary_sync: synchronize and other blocking calls over the whole capture (one row).
--
-- count: calls of the cuda*/cu*Synchronize family.
-- total_ns: time the CPU spent in them, ns.
-- blocking_count: every call that held the CPU until GPU work finished (blocking_calls): the
--   synchronize calls and the blocking copies and memsets.
-- blocking_ns: time the CPU spent in them, ns.
-- steady_blocking_count: those made in a GPU's steady state (steady_blocking_calls, each call
--   once).
CREATE VIEW summary_sync AS
SELECT (SELECT count(*) FROM api_calls WHERE category = 'sync') AS count,
       (SELECT coalesce(sum(duration), 0) FROM api_calls WHERE category = 'sync') AS total_ns,
       (SELECT count(*) FROM blocking_calls) AS blocking_count,
       (SELECT coalesce(sum(duration), 0) FROM blocking_calls) AS blocking_ns,
       (SELECT count(*) FROM (SELECT DISTINCT pid, tid, start FROM steady_blocking_calls)) AS steady_blocking_count;
