-- kernels: GPU time per kernel name, per GPU, per profile (from the store's kernels view,
-- docs/schema.md), with the kernel's category (the taxonomy in kernel_categories.yaml).
--
-- profile_id: the profile (profiles.profile_id).
-- device_id: CUDA device id.
-- name: short kernel name.
-- demangled_name: full demangled name (one of them, when several share the short name).
-- category: gemm, attention, communication, norm, ... or other, from the name.
-- count: executions.
-- total_ns: GPU time, ns.
-- mean_ns: mean duration, ns.
-- median_ns: median duration, ns.
-- min_ns: shortest, ns.
-- max_ns: longest, ns.
-- in_graph: executions inside a CUDA graph.
-- share_pct: share of the profile's kernel time on that GPU, %.
CREATE TABLE IF NOT EXISTS kernels (
    profile_id VARCHAR,
    device_id INTEGER,
    name VARCHAR,
    demangled_name VARCHAR,
    category VARCHAR,
    count BIGINT,
    total_ns BIGINT,
    mean_ns DOUBLE,
    median_ns DOUBLE,
    min_ns BIGINT,
    max_ns BIGINT,
    in_graph BIGINT,
    share_pct DOUBLE
);
