-- graph_launches: one row per CUDA graph execution, when the capture used
-- --cuda-graph-trace=graph (the default); the kernels inside are not in `kernels`.
--
-- start: start of the graph's work on the GPU, ns.
-- end: end of the graph's work on the GPU, ns.
-- duration: end - start, ns.
-- device_id: CUDA device id.
-- stream_id: CUDA stream id.
-- correlation_id: links the execution to its cudaGraphLaunch call (api_calls).
-- pid: operating-system process id.
-- graph_id: CUDA graph id.
-- graph_exec_id: id of the executable graph.
CREATE VIEW graph_launches AS
SELECT start, "end", "end" - start AS duration, device_id, stream_id, correlation_id,
       pid, graph_id, graph_exec_id
FROM base_graph_launches;
