-- memcpy: one row per memory copy on the GPU.
--
-- start: copy start on the GPU, ns.
-- end: copy end, ns.
-- duration: end - start, ns.
-- device_id: CUDA device id.
-- stream_id: CUDA stream id.
-- correlation_id: links the copy to its API call (api_calls).
-- global_pid: nsys's process id.
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
WITH m AS (
    SELECT *,
        CASE copy_kind WHEN 1 THEN 'HtoD' WHEN 2 THEN 'DtoH' WHEN 3 THEN 'HtoA'
            WHEN 4 THEN 'AtoH' WHEN 5 THEN 'AtoA' WHEN 6 THEN 'AtoD' WHEN 7 THEN 'DtoA'
            WHEN 8 THEN 'DtoD' WHEN 9 THEN 'HtoH' WHEN 10 THEN 'PtoP'
            WHEN 11 THEN 'UVM HtoD' WHEN 12 THEN 'UVM DtoH' WHEN 13 THEN 'UVM DtoD'
            ELSE 'other' END AS direction
    FROM base_memcpy
)
SELECT start, "end", "end" - start AS duration, device_id, stream_id, correlation_id,
       global_pid, (global_pid >> 24) & 16777215 AS pid, bytes, direction,
       mem_kind_name(src_kind) AS src_kind, mem_kind_name(dst_kind) AS dst_kind,
       CASE WHEN direction IN ('HtoD', 'HtoA') THEN mem_kind_name(src_kind)
            WHEN direction IN ('DtoH', 'AtoH') THEN mem_kind_name(dst_kind) END AS host_kind,
       coalesce(src_kind = 0 OR dst_kind = 0, false) AS pageable,
       CASE WHEN "end" > start THEN bytes / ("end" - start) END AS bandwidth_gbs,
       coalesce(graph_node_id, 0) <> 0 AS in_graph
FROM m;
