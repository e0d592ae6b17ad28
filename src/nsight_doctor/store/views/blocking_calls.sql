-- blocking_calls: API calls that held the CPU until GPU work finished: synchronize calls,
-- synchronous copies and memsets, and asynchronous copies from the device into pageable
-- memory (which the driver makes synchronous).
--
-- start: call entry, ns.
-- end: call return, ns.
-- duration: end - start, ns.
-- pid: operating-system process id.
-- tid: thread id.
-- name: API name.
-- reason: sync, sync_copy (synchronous memcpy/memset) or pageable_copy.
CREATE TABLE blocking_calls AS
SELECT a.start, a."end", a.duration, a.pid, a.tid, a.name,
       CASE WHEN a.category = 'sync' THEN 'sync'
            WHEN a.blocking THEN 'sync_copy'
            ELSE 'pageable_copy' END AS reason
FROM api_calls a
LEFT JOIN memcpy m ON m.correlation_id = a.correlation_id AND m.pid = a.pid
WHERE a.blocking OR (a.category = 'memcpy' AND m.direction IN ('DtoH', 'AtoH') AND m.dst_kind = 'pageable');
