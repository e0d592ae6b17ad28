-- blocking_calls: the API calls that held the CPU until GPU work finished: the one
-- definition of a blocking call, used by the summary and every rule. Following the CUDA
-- runtime's API synchronization behavior: synchronize calls; synchronous copies to or from
-- host memory (not device-to-device or peer copies, which do not wait); asynchronous copies
-- from the device into pageable host memory (which the driver makes synchronous); and
-- synchronous memsets of pinned or managed host memory (other memsets do not wait).
--
-- start: call entry, ns.
-- end: call return, ns.
-- duration: end - start, ns.
-- pid: operating-system process id.
-- tid: thread id.
-- device_id: the GPU the call waited for, where the trace links it to one (its copy, memset or
--   synchronization record; a synchronization record naming a GPU the process ran no work on
--   stands for the process's only GPU), else NULL.
-- name: API name.
-- correlation_id: links the call to its copy, memset or synchronization record.
-- reason: sync (a synchronize call), sync_copy (a synchronous copy), pageable_copy (an
--   asynchronous copy into pageable memory) or sync_memset.
CREATE TABLE blocking_calls AS
WITH c AS (
    SELECT a.start, a."end", a.duration, a.pid, a.tid, a.name, a.category, a.correlation_id,
           contains(a.name, 'Async') AS async
    FROM api_calls a WHERE a.category IN ('sync', 'memcpy', 'memset')
), procs AS (
    SELECT pid, list(device_id) AS devices FROM process_gpus GROUP BY pid
), y AS (
    -- The GPU a synchronization record names, when its process ran work there (or none at
    -- all); else the one GPU the process ran work on (nsys 2025.3 records device 0 for the
    -- syncs of a process that ran on GPU 1 alone); else unknown.
    SELECT s.correlation_id, s.pid,
           CASE WHEN any_value(p.devices) IS NULL
                  OR list_contains(any_value(p.devices), any_value(s.device_id)) THEN any_value(s.device_id)
                WHEN len(any_value(p.devices)) = 1 THEN any_value(p.devices)[1] END AS device_id
    FROM base_syncs s LEFT JOIN procs p USING (pid)
    GROUP BY s.correlation_id, s.pid
)
SELECT c.start, c."end", c.duration, c.pid, c.tid,
       coalesce(m.device_id, s.device_id, y.device_id) AS device_id, c.name, c.correlation_id,
       CASE WHEN c.category = 'sync' THEN 'sync'
            WHEN c.category = 'memset' THEN 'sync_memset'
            WHEN c.async THEN 'pageable_copy'
            ELSE 'sync_copy' END AS reason
FROM c
    -- (each side names the category it joins, so that every join is on equal keys: a
    -- condition on c alone made DuckDB loop over every pair, 2 s at 2 M kernels)
LEFT JOIN (SELECT *, 'memcpy' AS category FROM memcpy) m
       ON m.correlation_id = c.correlation_id AND m.pid = c.pid AND m.category = c.category
LEFT JOIN (SELECT *, 'memset' AS category FROM memset) s
       ON s.correlation_id = c.correlation_id AND s.pid = c.pid AND s.category = c.category
LEFT JOIN (SELECT *, 'sync' AS category FROM y) y
       ON y.correlation_id = c.correlation_id AND y.pid = c.pid AND y.category = c.category
WHERE c.category = 'sync'
   OR (c.category = 'memcpy' AND NOT c.async AND coalesce(m.direction, '') NOT IN ('DtoD', 'PtoP', 'AtoA', 'AtoD', 'DtoA'))
   OR (c.category = 'memcpy' AND c.async AND m.direction IN ('DtoH', 'AtoH') AND m.dst_kind = 'pageable')
   OR (c.category = 'memset' AND NOT c.async AND s.mem_kind IN ('pinned', 'managed'));
