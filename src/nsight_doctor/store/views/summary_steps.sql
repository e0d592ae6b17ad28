-- summary_steps: every steady step of every GPU (steady_steps), in time order, with the split
-- of its time by what bounded it.
--
-- device_id: CUDA device id.
-- step: step number on this GPU.
-- phase: its steady phase (prefill, decode, mixed or steady).
-- start: step start, ns.
-- duration: the step time, ns.
-- ops: GPU operations that started in it.
-- gpu_ns: GPU busy while the launching thread was free, ns.
-- blocked_ns: GPU busy while that thread was blocked waiting for it, ns.
-- launch_ns: idle, waiting for launches, ns.
-- queued_ns: idle with the next operation already issued, ns.
-- sync_ns: idle with the thread still inside a blocking call, ns.
-- cpu_ns: idle while the thread ran code outside CUDA, ns.
-- api_ns: idle while it was in other CUDA calls, ns.
-- setup_ns: idle in one-time work and compiling, ns.
CREATE VIEW summary_steps AS
SELECT device_id, step, phase, start, duration, ops, gpu_ns, blocked_ns, launch_ns, queued_ns, sync_ns,
       cpu_ns, api_ns, setup_ns
FROM steady_steps ORDER BY device_id, step;
