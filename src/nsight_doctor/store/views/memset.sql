-- memset: one row per memset on the GPU.
--
-- start: start on the GPU, ns.
-- end: end, ns.
-- duration: end - start, ns.
-- device_id: CUDA device id.
-- stream_id: CUDA stream id.
-- correlation_id: links the memset to its API call (api_calls).
-- global_pid: nsys's process id.
-- pid: operating-system process id.
-- bytes: bytes set.
-- mem_kind: memory kind: device, pinned, managed, ...
-- in_graph: whether the memset ran inside a CUDA graph.
CREATE VIEW memset AS
SELECT start, "end", "end" - start AS duration, device_id, stream_id, correlation_id,
       global_pid, (global_pid >> 24) & 16777215 AS pid, bytes,
       mem_kind_name(mem_kind) AS mem_kind, coalesce(graph_node_id, 0) <> 0 AS in_graph
FROM base_memset;
