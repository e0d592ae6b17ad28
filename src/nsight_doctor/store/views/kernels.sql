-- kernels: one row per kernel execution (graph-replayed kernels appear here only when the
-- capture used --cuda-graph-trace=node).
--
-- start: kernel start on the GPU, ns.
-- end: kernel end on the GPU, ns.
-- duration: end - start, ns.
-- device_id: CUDA device id.
-- context_id: CUDA context id.
-- stream_id: CUDA stream id.
-- correlation_id: links the kernel to the API call that launched it (api_calls).
-- pid: operating-system id of the process that launched the kernel.
-- name: short kernel name (e.g. "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT").
-- demangled_name: full demangled name, with template arguments.
-- grid_x: grid dimension x (blocks).
-- grid_y: grid dimension y.
-- grid_z: grid dimension z.
-- block_x: block dimension x (threads).
-- block_y: block dimension y.
-- block_z: block dimension z.
-- grid_size: blocks in the grid.
-- block_size: threads per block.
-- registers_per_thread: registers per thread.
-- static_smem_bytes: static shared memory per block, bytes.
-- dynamic_smem_bytes: dynamic shared memory per block, bytes.
-- local_mem_per_thread: local memory per thread, bytes (non-zero means spills or stack).
-- graph_node_id: CUDA graph node id, when the kernel ran inside a graph.
-- graph_id: CUDA graph id, where the export records it (nsys 2026.1 and newer).
-- in_graph: whether the kernel ran inside a CUDA graph.
-- category: the kernel's category from its name: gemm, attention, norm, activation, rotary,
--   kv-cache, communication, moe, sampling, embedding, quantization, ssm, elementwise,
--   reduction, memcpy, attention-unfused or other (store/kernel_categories.yaml); and
--   attention-unfused for every kernel of an unfused attention chain found by its shape
--   (attention_chains): its GEMMs, softmax and the passes between them.
CREATE VIEW kernels AS
SELECT k.start, k."end", k."end" - k.start AS duration,
       k.device_id, k.context_id, k.stream_id, k.correlation_id, k.pid,
       c.name, c.demangled_name,
       k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z,
       k.grid_x::BIGINT * k.grid_y * k.grid_z AS grid_size,
       k.block_x * k.block_y * k.block_z AS block_size,
       k.registers_per_thread, k.static_smem_bytes, k.dynamic_smem_bytes,
       k.local_mem_per_thread,
       k.graph_node_id, k.graph_id,
       k.graph_node_id IS NOT NULL OR k.graph_id IS NOT NULL AS in_graph,
       CASE WHEN a.chain IS NOT NULL THEN 'attention-unfused' ELSE c.category END AS category
FROM base_kernels k
LEFT JOIN attention_kernels a ON a.device_id = k.device_id AND a.stream_id = k.stream_id AND a.start = k.start
LEFT JOIN kernel_classes_t c
  ON c.short_name_id IS NOT DISTINCT FROM k.short_name_id AND c.demangled_name_id IS NOT DISTINCT FROM k.demangled_name_id;
