-- summary_step_parts: where each GPU's steady step goes (steady_steps): the mean step and the
-- mean of each part of it, which add up to the mean step: gpu_ns + blocked_ns + launch_ns +
-- queued_ns + sync_ns + cpu_ns + api_ns + setup_ns = step_ns_mean.
--
-- device_id: CUDA device id.
-- steps: steady steps.
-- step_ns_mean: the mean step time, ns.
-- gpu_ns: GPU busy while the launching thread was free, per step, ns.
-- blocked_ns: GPU busy while that thread was blocked waiting for it (a synchronize call, a
--   blocking copy), per step, ns.
-- launch_ns: idle, waiting for launches, per step, ns.
-- queued_ns: idle with the next operation already issued, per step, ns.
-- sync_ns: idle with the thread still inside a blocking call, per step, ns.
-- cpu_ns: idle while the thread ran code outside CUDA, per step, ns.
-- api_ns: idle while it was in other CUDA calls, per step, ns.
-- setup_ns: idle in one-time work and compiling, per step, ns.
CREATE VIEW summary_step_parts AS
SELECT device_id, count(*) AS steps, avg(duration) AS step_ns_mean, avg(gpu_ns) AS gpu_ns,
       avg(blocked_ns) AS blocked_ns, avg(launch_ns) AS launch_ns, avg(queued_ns) AS queued_ns,
       avg(sync_ns) AS sync_ns, avg(cpu_ns) AS cpu_ns, avg(api_ns) AS api_ns, avg(setup_ns) AS setup_ns
FROM steady_steps GROUP BY device_id ORDER BY device_id;
