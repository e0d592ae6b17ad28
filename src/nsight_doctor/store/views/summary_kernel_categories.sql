-- summary_kernel_categories: kernel time by category (kernels.category) in the steady state,
-- or over the whole capture when no GPU has a steady state; most time first.
--
-- category: gemm, attention, norm, activation, ... (store/kernel_categories.yaml).
-- count: kernels.
-- total_ns: their total time, ns.
-- share_pct: total_ns as % of all kernel time counted.
-- scope: steady or capture: which part of the profile was counted.
CREATE VIEW summary_kernel_categories AS
WITH has_steady AS (SELECT count(*) > 0 AS yes FROM steady_state), k AS (
    SELECT k.category, k.duration
    FROM kernels k LEFT JOIN phases p
      ON p.device_id = k.device_id AND k.start >= p.start AND k.start < p."end" AND p.steady
    WHERE p.device_id IS NOT NULL OR NOT (SELECT yes FROM has_steady)
)
SELECT category, count(*) AS count, sum(duration) AS total_ns,
       100.0 * sum(duration) / sum(sum(duration)) OVER () AS share_pct,
       CASE WHEN (SELECT yes FROM has_steady) THEN 'steady' ELSE 'capture' END AS scope
FROM k GROUP BY category ORDER BY total_ns DESC, category;
