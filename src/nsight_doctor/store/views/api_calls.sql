-- api_calls: one row per CUDA runtime or driver API call on a CPU thread.
--
-- start: call entry on the CPU, ns.
-- end: call return, ns.
-- duration: end - start, ns.
-- pid: operating-system process id.
-- tid: thread id.
-- correlation_id: links a launch or copy to its GPU operation.
-- name: API name without version suffixes (cudaLaunchKernel_v7000 -> cudaLaunchKernel).
-- raw_name: the name as recorded.
-- api: runtime (cuda*) or driver (cu*).
-- category: launch, graph_launch, memcpy, memset, sync (the synchronize calls), module
--   (loading and linking code), graph_build (stream capture, graph instantiation), host_alloc
--   (pinning host memory), alloc (device memory), setup (creating contexts, streams, events;
--   device and function attributes), or other.
-- one_time: whether the category is work done once, at start-up or on a first call (module,
--   graph_build, setup, host_alloc), rather than every step. Which calls held the CPU until GPU
--   work finished is in blocking_calls.
-- return_value: the call's return code (0 is success).
CREATE VIEW api_calls AS
SELECT c.start, c."end", c."end" - c.start AS duration, c.pid, c.tid,
       c.correlation_id, n.name, n.raw_name, n.api, n.category, n.one_time, c.return_value
FROM base_api_calls c LEFT JOIN api_names_t n ON n.name_id = c.name_id;
