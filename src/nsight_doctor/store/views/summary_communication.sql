-- summary_communication: collective communication per GPU (comm_kernels).
--
-- device_id: CUDA device id.
-- pid: the process (rank) that drove it.
-- collectives: collective kernels.
-- ranks: GPUs that took part.
-- comm_ns: their total time, ns.
-- comm_pct: comm_ns as % of the GPU's activity window.
-- transfer_ns: the collectives' own time (the fastest rank's), ns.
-- wait_ns: time spent waiting inside collectives for a slower rank, ns.
-- exposed_ns: collective time during which no other kernel ran on the GPU, ns.
-- last_arrivals: collectives this GPU started last (the others waited for it).
CREATE VIEW summary_communication AS
SELECT c.device_id, any_value(c.pid) AS pid, count(*) AS collectives, max(c.ranks) AS ranks,
       sum(c.duration) AS comm_ns, 100.0 * sum(c.duration) / any_value(a.window_ns) AS comm_pct,
       sum(c.transfer_ns) AS transfer_ns, sum(c.wait_ns) AS wait_ns, sum(c.exposed_ns) AS exposed_ns,
       count(*) FILTER (WHERE c.last_to_arrive) AS last_arrivals
FROM comm_kernels c JOIN gpu_activity a USING (device_id) GROUP BY c.device_id ORDER BY c.device_id;
