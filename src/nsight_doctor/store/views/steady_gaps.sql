-- steady_gaps: the idle gaps (gpu_gaps) that lie in a steady phase (phases.steady), with that
-- phase: the idle time that findings about the workload divide among themselves by cause. A
-- table, as eight rules read it.
--
-- device_id: CUDA device id.
-- start: gap start, ns.
-- end: gap end, ns.
-- duration: its length, ns.
-- cause: its cause (see gpu_gaps).
-- launch_side: for launch gaps, cpu or gpu (see gpu_gaps).
-- blocking_name: the blocking call that returned in it, if any.
-- blocking_reason: that call's reason (see blocking_calls).
-- copy_ns: CPU time in non-blocking copy calls within it (gaps of 100 us or more), ns.
-- module_ns: CPU time in loading code within it (gaps of 100 us or more), ns.
-- alloc_ns: CPU time in allocation calls within it, ns.
-- other_api_ns: CPU time in other CUDA calls within it, ns.
-- top_api: the CUDA call with the most time in it.
-- next_op: the operation that ended it.
-- next_kind: that operation's kind.
-- pid: the process that issued it.
-- readback_bytes: the bytes of the device-to-host copy the gap began with (see gpu_gaps).
-- after_readback: whether that copy was 32 KiB or more (see gpu_gaps).
-- phase: the steady phase's name (prefill, decode, mixed or steady).
-- claimed_by: the finding that counts this gap instead of the one its cause leads to, else
--   NULL; one definition for every rule: host-sampling (a gap of cause cpu, api or sync after
--   a read-back, after_readback) or moe-routing (a sync gap after a synchronize call or a
--   copy into pageable memory, on a GPU whose MoE layers pick their experts on the host:
--   moe_layers.host_routed). Rules leave claimed gaps to that finding even when it is not
--   selected, so that no gap is counted by two definitions.
CREATE TABLE steady_gaps AS
SELECT g.device_id, g.start, g."end", g.duration, g.cause, g.launch_side, g.blocking_name,
       g.blocking_reason, g.copy_ns, g.module_ns, g.alloc_ns, g.other_api_ns, g.top_api, g.next_op, g.next_kind,
       g.pid, g.readback_bytes, g.after_readback, p.name AS phase,
       CASE WHEN g.after_readback AND g.cause IN ('cpu', 'api', 'sync') THEN 'host-sampling'
            WHEN g.cause = 'sync' AND g.blocking_reason IN ('sync', 'pageable_copy')
                 AND g.device_id IN (SELECT device_id FROM moe_layers WHERE host_routed) THEN 'moe-routing'
       END AS claimed_by
-- (A GPU has a few steady phases, which do not overlap (test_invariants), so a join on the
-- GPU that tests each of them is several times faster than an ASOF join, which sorts every
-- gap with its columns.)
FROM gpu_gaps g
JOIN (SELECT device_id, start, "end", name FROM phases WHERE steady) p
  ON p.device_id = g.device_id AND g.start >= p.start AND g."end" <= p."end";
