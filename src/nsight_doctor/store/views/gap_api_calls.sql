-- gap_api_calls: a table macro, gap_api_calls(start, end, pid): the CUDA API calls that ran
-- between start and end (in process pid, or any process when pid is NULL), by name, with the
-- time each name overlapped the interval, most first.
--
-- name: API name.
-- count: calls that overlapped the interval.
-- overlap_ns: the time they spent inside it, ns.
CREATE MACRO gap_api_calls(t0, t1, p) AS TABLE
SELECT name, count(*) AS count, sum(least("end", t1) - greatest(start, t0)) AS overlap_ns
FROM api_calls
WHERE start < t1 AND "end" > t0 AND (p IS NULL OR pid = p)
GROUP BY name ORDER BY overlap_ns DESC, name;
