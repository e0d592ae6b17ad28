-- capture: one row describing the capture as a whole.
--
-- duration: capture length in ns; events are timed in ns from the capture start (0).
-- gpu_start: start of the first GPU operation (kernel, graph, memcpy, memset), ns.
-- gpu_end: end of the last GPU operation, ns.
-- gpu_window: gpu_end - gpu_start, the GPU activity window, ns.
-- has_cuda_trace: whether any CUDA API call or GPU operation was recorded.
CREATE VIEW capture AS
WITH ops AS (
    SELECT min(start) AS s, max("end") AS e, count(*) AS n FROM gpu_ops
), api AS (
    SELECT count(*) AS n, max("end") AS e FROM base_api_calls
)
SELECT
    coalesce((SELECT max(duration) FROM base_capture), greatest(ops.e, api.e)) AS duration,
    ops.s AS gpu_start,
    ops.e AS gpu_end,
    ops.e - ops.s AS gpu_window,
    (ops.n + api.n) > 0 AS has_cuda_trace
FROM ops, api;
