-- summary_steady_idle: each GPU's idle time in its steady state (steady_gaps) by cause, most
-- time first.
--
-- device_id: CUDA device id.
-- cause: queued, sync, launch, api, cpu or setup (see gpu_gaps).
-- count: gaps.
-- total_ns: their total length, ns.
CREATE VIEW summary_steady_idle AS
SELECT device_id, cause, count(*) AS count, sum(duration) AS total_ns
FROM steady_gaps GROUP BY device_id, cause ORDER BY device_id, total_ns DESC, cause;
