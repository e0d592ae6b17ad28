-- summary_idle: the idle gaps of every GPU (gpu_gaps), in all (one row).
--
-- gap_count: gaps.
-- idle_ns: their total length, ns.
CREATE VIEW summary_idle AS
SELECT count(*) AS gap_count, coalesce(sum(duration), 0) AS idle_ns FROM gpu_gaps;
