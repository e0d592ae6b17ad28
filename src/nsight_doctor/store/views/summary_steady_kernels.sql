-- summary_steady_kernels: kernels and CUDA graph executions of the steady state (of every
-- GPU; of the whole capture when no GPU has a steady state) grouped by name, template
-- arguments and launch shape, most GPU time first: what matches kernels across profiles.
--
-- name: kernel name, or "graph <id>" for a CUDA graph execution.
-- demangled_name: full demangled name, with template arguments (NULL for graphs).
-- kind: kernel or graph.
-- grid: grid dimensions, "x,y,z" (NULL for graphs).
-- block: block dimensions, "x,y,z" (NULL for graphs).
-- category: the kernel's category (kernels.category); cuda-graph for graphs.
-- count: executions.
-- total_ns: their total time, ns.
-- share_pct: total_ns as % of all kernel and graph time counted.
-- mean_ns: mean duration, ns.
-- median_ns: median duration, ns.
-- scope: steady or capture: which part of the profile was counted.
CREATE VIEW summary_steady_kernels AS
WITH has_steady AS (SELECT count(*) > 0 AS yes FROM steady_state), ops AS (
    -- (launch dimensions as numbers: spelled out per row below, not per kernel)
    -- (a triple with a NULL in it is all NULL: its text, which the rows show, is NULL)
    SELECT device_id, start, duration, name, demangled_name, 'kernel' AS kind,
           CASE WHEN grid_x IS NULL OR grid_y IS NULL OR grid_z IS NULL THEN NULL ELSE grid_x END AS grid_x,
           CASE WHEN grid_x IS NULL OR grid_y IS NULL OR grid_z IS NULL THEN NULL ELSE grid_y END AS grid_y,
           CASE WHEN grid_x IS NULL OR grid_y IS NULL OR grid_z IS NULL THEN NULL ELSE grid_z END AS grid_z,
           CASE WHEN block_x IS NULL OR block_y IS NULL OR block_z IS NULL THEN NULL ELSE block_x END AS block_x,
           CASE WHEN block_x IS NULL OR block_y IS NULL OR block_z IS NULL THEN NULL ELSE block_y END AS block_y,
           CASE WHEN block_x IS NULL OR block_y IS NULL OR block_z IS NULL THEN NULL ELSE block_z END AS block_z,
           category
    FROM kernels
    UNION ALL
    SELECT device_id, start, duration, name, NULL, 'graph', NULL, NULL, NULL, NULL, NULL, NULL, 'cuda-graph'
    FROM gpu_ops WHERE kind = 'graph'
), o AS (
    SELECT o.* FROM ops o LEFT JOIN phases p
      ON p.device_id = o.device_id AND o.start >= p.start AND o.start < p."end" AND p.steady
    WHERE p.device_id IS NOT NULL OR NOT (SELECT yes FROM has_steady)
)
SELECT name, demangled_name, kind, grid_x || ',' || grid_y || ',' || grid_z AS grid,
       block_x || ',' || block_y || ',' || block_z AS block, any_value(category) AS category, count(*) AS count,
       sum(duration) AS total_ns, 100.0 * sum(duration) / sum(sum(duration)) OVER () AS share_pct,
       avg(duration) AS mean_ns, median(duration) AS median_ns,
       CASE WHEN (SELECT yes FROM has_steady) THEN 'steady' ELSE 'capture' END AS scope
FROM o GROUP BY name, demangled_name, kind, grid_x, grid_y, grid_z, block_x, block_y, block_z
ORDER BY total_ns DESC, name, demangled_name, grid, block;
