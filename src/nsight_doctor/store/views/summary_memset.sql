-- summary_memset: memsets over the whole capture (one row).
--
-- count: memsets.
-- bytes: bytes set.
-- total_ns: sum of their durations, ns.
CREATE VIEW summary_memset AS
SELECT count(*) AS count, coalesce(sum(bytes), 0) AS bytes, coalesce(sum(duration), 0) AS total_ns
FROM memset;
