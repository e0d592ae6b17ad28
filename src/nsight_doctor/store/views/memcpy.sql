-- memcpy: one row per memory copy on the GPU.
--
-- start: copy start on the GPU, ns.
-- end: copy end, ns.
-- duration: end - start, ns.
-- device_id: CUDA device id.
-- stream_id: CUDA stream id.
-- correlation_id: links the copy to its API call (api_calls).
-- pid: operating-system process id.
-- bytes: bytes copied.
-- direction: HtoD, DtoH, DtoD, HtoH, PtoP, or unified-memory directions; 'other' if unknown.
-- src_kind: memory kind of the source: pageable, pinned, device, array, managed, ...
-- dst_kind: memory kind of the destination.
-- host_kind: kind of the host-side memory of a host/device copy (pageable or pinned), else NULL.
-- pageable: whether either side is pageable host memory.
-- bandwidth_gbs: bytes / duration, in GB/s (10^9 bytes per second).
-- in_graph: whether the copy ran inside a CUDA graph.
CREATE VIEW memcpy AS
SELECT start, "end", "end" - start AS duration, device_id, stream_id, correlation_id, pid, bytes,
       direction, src_kind, dst_kind,
       CASE WHEN direction IN ('HtoD', 'HtoA') THEN src_kind
            WHEN direction IN ('DtoH', 'AtoH') THEN dst_kind END AS host_kind,
       coalesce(src_kind = 'pageable' OR dst_kind = 'pageable', false) AS pageable,
       CASE WHEN "end" > start THEN bytes / ("end" - start) END AS bandwidth_gbs,
       graph_node_id IS NOT NULL AS in_graph
FROM base_memcpy;
