-- summary_memcpy: memory copies over the whole capture (one row).
--
-- count: copies.
-- bytes: bytes copied.
-- total_ns: sum of their durations, ns.
CREATE VIEW summary_memcpy AS
SELECT count(*) AS count, coalesce(sum(bytes), 0) AS bytes, coalesce(sum(duration), 0) AS total_ns
FROM memcpy;
