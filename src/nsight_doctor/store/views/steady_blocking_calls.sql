-- steady_blocking_calls: the blocking calls (blocking_calls) made in a GPU's steady state, once
-- for each GPU they may have waited for: made by a process that issued work to that GPU, for
-- that GPU or for an unknown one. The one definition that the summary, moe_layers, host-sync
-- and sync-memcpy count.
--
-- device_id: the GPU, in whose steady state the call was made.
-- start: call entry, ns.
-- end: call return, ns.
-- duration: end - start, ns.
-- pid: operating-system process id.
-- tid: thread id.
-- name: API name.
-- correlation_id: links the call to its copy, memset or synchronization record.
-- reason: sync, sync_copy, pageable_copy or sync_memset (see blocking_calls).
CREATE VIEW steady_blocking_calls AS
SELECT s.device_id, c.start, c."end", c.duration, c.pid, c.tid, c.name, c.correlation_id, c.reason
FROM blocking_calls c
JOIN process_gpus p ON p.pid = c.pid
JOIN steady_state s ON s.device_id = p.device_id
WHERE c.start >= s.start AND c.start <= s."end" AND coalesce(c.device_id, s.device_id) = s.device_id;
