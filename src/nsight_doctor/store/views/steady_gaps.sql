-- steady_gaps: the idle gaps (gpu_gaps) that lie in a steady phase (phases.steady), with that
-- phase and their parts: the idle time that findings about the workload divide among
-- themselves. Each part of a gap has one owner, so that no idle nanosecond is counted by two
-- findings: launch_ns is launch-bound's; sync_ns host-sync's (sync_copy_ns, inside
-- synchronous copies, sync-memcpy's); cpu_ns, alloc_ns and other_api_ns gpu-idle's; copy_ns
-- pageable-memcpy's; setup_ns steady-compile's when code was loaded; queued_ns no finding's
-- (the GPU had work queued; communication-exposed measures the waits of collectives). A
-- claimed gap (claimed_by) gives its sync, cpu and api parts to the claiming finding instead.
-- A view: with 2 M gaps, a read costs tens of milliseconds, and a table (a copy of almost every
-- gap) took 2.4 s to write.
--
-- device_id: CUDA device id.
-- start: gap start, ns.
-- end: gap end, ns.
-- duration: its length, ns.
-- cause: its dominant part (see gpu_gaps).
-- launch_side: for launch gaps, cpu or gpu (see gpu_gaps).
-- blocking_name: the blocking call that returned in it, if any.
-- blocking_waited: whether a blocking call was in progress when it began (see gpu_gaps).
-- blocking_reason: that call's reason (see blocking_calls).
-- launch_ns: waiting for launches (see gpu_gaps), ns.
-- queued_ns: the next operation already issued (see gpu_gaps), ns.
-- sync_ns: the thread inside a blocking call while the GPU was idle, ns.
-- sync_copy_ns: the part of sync_ns inside synchronous copies and memsets, ns.
-- cpu_ns: the thread running code outside CUDA, ns.
-- api_ns: the thread inside other CUDA calls (alloc_ns + copy_ns + other_api_ns), ns.
-- alloc_ns: the part of api_ns in allocation calls, ns.
-- copy_ns: the part of api_ns in copy calls that do not block (staging pageable data), ns.
-- other_api_ns: the rest of api_ns, ns.
-- setup_ns: one-time work and compiling (see gpu_gaps), ns.
-- module_ns: the process's time in loading code within it, ns.
-- top_api: the CUDA call with the most of the thread's time in it.
-- next_op: the operation that ended it.
-- next_kind: that operation's kind.
-- pid: the process that issued it.
-- tid: the thread whose state splits it (see gpu_gaps).
-- readback_bytes: the bytes of the device-to-host copy the gap began with (see gpu_gaps).
-- after_readback: whether that copy was 32 KiB or more (see gpu_gaps).
-- step: the step it lies in, or NULL.
-- phase: the steady phase's name (prefill, decode, mixed or steady).
-- claimed_by: the finding that counts this gap's sync, cpu and api parts instead of the ones
--   above, else NULL; one definition for every rule: host-sampling (a gap after a read-back,
--   after_readback, in which the CPU worked or waited) or moe-routing (a gap in which the thread
--   waited in a synchronize call or a copy into pageable memory, on a GPU whose MoE layers pick
--   their experts on the host: moe_layers.host_routed). Rules leave claimed parts to that
--   finding even when it is not selected, so that no time is counted by two definitions.
CREATE VIEW steady_gaps AS
SELECT g.device_id, g.start, g."end", g.duration, g.cause, g.launch_side, g.blocking_name,
       g.blocking_waited, g.blocking_reason, g.launch_ns, g.queued_ns, g.sync_ns, g.sync_copy_ns, g.cpu_ns, g.api_ns, g.alloc_ns,
       g.copy_ns, g.other_api_ns, g.setup_ns, g.module_ns, g.top_api, g.next_op, g.next_kind, g.pid, g.tid,
       g.readback_bytes, g.after_readback, g.step, p.name AS phase,
       CASE WHEN g.after_readback AND g.sync_ns + g.cpu_ns + g.api_ns > 0 THEN 'host-sampling'
            WHEN g.sync_ns > g.sync_copy_ns
                 AND g.device_id IN (SELECT device_id FROM moe_layers_t WHERE host_routed) THEN 'moe-routing'
       END AS claimed_by
-- (A GPU has a few steady phases, which do not overlap (test_invariants), so a join on the
-- GPU that tests each of them is several times faster than an ASOF join, which sorts every
-- gap with its columns.)
FROM gpu_gaps g
JOIN (SELECT device_id, start, "end", name FROM phases WHERE steady) p
  ON p.device_id = g.device_id AND g.start >= p.start AND g."end" <= p."end";
