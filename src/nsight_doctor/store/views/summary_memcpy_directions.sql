-- summary_memcpy_directions: copies by direction and host memory kind, most time first.
--
-- direction: HtoD, DtoH, DtoD, PtoP, ... (see memcpy).
-- host_kind: pageable or pinned for host/device copies, '-' otherwise.
-- count: copies.
-- bytes: bytes copied.
-- total_ns: sum of their durations, ns.
-- bandwidth_gbs: bytes / total_ns, GB/s.
CREATE VIEW summary_memcpy_directions AS
SELECT direction, coalesce(host_kind, '-') AS host_kind, count(*) AS count,
       sum(bytes) AS bytes, sum(duration) AS total_ns,
       sum(bytes) / nullif(sum(duration), 0) AS bandwidth_gbs
FROM memcpy GROUP BY ALL ORDER BY total_ns DESC, direction, host_kind;
