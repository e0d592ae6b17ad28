-- steady_steps: the steps (steps) that lie in a GPU's steady phases (phases.steady), with that
-- phase: what every per-step figure is measured on (a step that holds an idle stretch, and so
-- spans two pieces of a phase, is left out, as in steady_state).
--
-- device_id: CUDA device id.
-- step: step number on this GPU (steps.step).
-- phase: the steady phase's name (prefill, decode, mixed or steady).
-- start: step start, ns.
-- end: step end, ns.
-- duration: the step time, ns.
-- ops: GPU operations that started in it.
-- busy_ns: GPU busy time in it (gpu_ns + blocked_ns), ns.
-- gpu_ns: busy while its launching thread was free, ns.
-- blocked_ns: busy while that thread was blocked waiting for it, ns.
-- launch_ns: idle, waiting for launches, ns.
-- queued_ns: idle with the next operation already issued, ns.
-- sync_ns: idle with the thread still inside a blocking call, ns.
-- cpu_ns: idle while the thread ran code outside CUDA, ns.
-- api_ns: idle while it was in other CUDA calls, ns.
-- setup_ns: idle in one-time work and compiling, ns.
CREATE VIEW steady_steps AS
SELECT s.device_id, s.step, p.name AS phase, s.start, s."end", s.duration, s.ops, s.busy_ns, s.gpu_ns,
       s.blocked_ns, s.launch_ns, s.queued_ns, s.sync_ns, s.cpu_ns, s.api_ns, s.setup_ns
FROM steps s
JOIN (SELECT device_id, start, "end", name FROM phases WHERE steady) p
  ON p.device_id = s.device_id AND s.start >= p.start AND s."end" <= p."end";
