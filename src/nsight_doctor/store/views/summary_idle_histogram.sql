-- summary_idle_histogram: idle gaps by length, one row per bucket, shortest first.
--
-- bucket: <10us, 10-100us, 100us-1ms, 1-10ms, 10-100ms or >=100ms.
-- count: gaps in the bucket.
-- total_ns: their total length, ns.
CREATE VIEW summary_idle_histogram AS
WITH b(ord, bucket, lo, hi) AS (
    VALUES (0, '<10us', 0, 10000), (1, '10-100us', 10000, 100000), (2, '100us-1ms', 100000, 1000000),
           (3, '1-10ms', 1000000, 10000000), (4, '10-100ms', 10000000, 100000000),
           (5, '>=100ms', 100000000, NULL)
)
SELECT b.bucket, count(g.duration) AS count, coalesce(sum(g.duration), 0) AS total_ns
FROM b LEFT JOIN gpu_gaps g ON g.duration >= b.lo AND (b.hi IS NULL OR g.duration < b.hi)
GROUP BY b.ord, b.bucket ORDER BY b.ord;
