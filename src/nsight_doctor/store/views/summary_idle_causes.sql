-- summary_idle_causes: idle gaps by cause (see gpu_gaps), most time first.
--
-- cause: queued, sync, launch, api or cpu.
-- count: gaps.
-- total_ns: their total length, ns.
CREATE VIEW summary_idle_causes AS
SELECT cause, count(*) AS count, sum(duration) AS total_ns FROM gpu_gaps
GROUP BY cause ORDER BY total_ns DESC, cause;
