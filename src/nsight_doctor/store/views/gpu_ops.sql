-- gpu_ops: every operation on a GPU: kernels, CUDA graph executions, memcpy and memset.
--
-- device_id: CUDA device id.
-- start: start on the GPU, ns.
-- end: end, ns.
-- duration: end - start, ns.
-- kind: kernel, graph, memcpy or memset.
-- name: kernel name, graph id, or copy direction.
-- stream_id: CUDA stream id.
-- correlation_id: links the operation to the API call that issued it.
-- pid: operating-system process id.
CREATE VIEW gpu_ops AS
SELECT device_id, start, "end", "end" - start AS duration, 'kernel' AS kind, s.value AS name,
       stream_id, correlation_id, pid
FROM base_kernels k LEFT JOIN base_strings s ON s.id = k.short_name_id
UNION ALL
SELECT device_id, start, "end", "end" - start, 'graph', 'graph ' || coalesce(graph_id::VARCHAR, '?'),
       stream_id, correlation_id, pid
FROM base_graph_launches
UNION ALL
SELECT device_id, start, "end", "end" - start, 'memcpy', direction, stream_id, correlation_id, pid
FROM memcpy
UNION ALL
SELECT device_id, start, "end", "end" - start, 'memset', 'memset', stream_id, correlation_id, pid
FROM base_memset;
