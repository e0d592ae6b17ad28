-- summary_idle: the idle gaps of every GPU (gpu_gaps), in all (one row).
--
-- gap_count: gaps.
-- idle_ns: their total length, ns: summed over GPUs (GPU time, not wall time, with several).
-- gpus: the GPUs with work (gpu_busy) whose idle time that sums.
CREATE VIEW summary_idle AS
SELECT count(*) AS gap_count, coalesce(sum(duration), 0) AS idle_ns,
       (SELECT count(DISTINCT device_id) FROM gpu_busy) AS gpus
FROM gpu_gaps;
