-- summary_blocking_by_api: the calls that held the CPU until GPU work finished
-- (blocking_calls), by API, most time first.
--
-- name: API name.
-- count: calls.
-- total_ns: time the CPU spent in them, ns.
CREATE VIEW summary_blocking_by_api AS
SELECT name, count(*) AS count, sum(duration) AS total_ns FROM blocking_calls
GROUP BY name ORDER BY total_ns DESC, name;
