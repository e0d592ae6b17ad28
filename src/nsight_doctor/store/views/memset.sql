-- memset: one row per memset on the GPU.
--
-- start: start on the GPU, ns.
-- end: end, ns.
-- duration: end - start, ns.
-- device_id: CUDA device id.
-- stream_id: CUDA stream id.
-- correlation_id: links the memset to its API call (api_calls).
-- pid: operating-system process id.
-- bytes: bytes set.
-- mem_kind: memory kind: device, pinned, managed, ...
-- in_graph: whether the memset ran inside a CUDA graph.
CREATE VIEW memset AS
SELECT start, "end", "end" - start AS duration, device_id, stream_id, correlation_id,
       pid, bytes, mem_kind, graph_node_id IS NOT NULL AS in_graph
FROM base_memset;
