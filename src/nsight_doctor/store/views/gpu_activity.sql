-- gpu_activity: each GPU's activity window (its first operation to its last) and how busy it
-- was in it: the one definition of a GPU's window, busy and idle time that the summary and the
-- rules share.
--
-- device_id: CUDA device id.
-- start: start of the GPU's first operation, ns.
-- end: end of its last operation, ns.
-- window_ns: end - start, ns.
-- busy_ns: time in which at least one operation ran (gpu_busy), ns.
-- idle_ns: window_ns - busy_ns: the sum of its idle gaps (gpu_gaps), ns.
-- busy_pct: busy_ns as % of window_ns.
-- intervals: busy intervals (gpu_busy rows).
CREATE VIEW gpu_activity AS
SELECT device_id, min(start) AS start, max("end") AS "end", max("end") - min(start) AS window_ns,
       sum(duration) AS busy_ns, max("end") - min(start) - sum(duration) AS idle_ns,
       100.0 * sum(duration) / nullif(max("end") - min(start), 0) AS busy_pct,
       count(*) AS intervals
FROM gpu_busy GROUP BY device_id;
