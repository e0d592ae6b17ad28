-- kernel_categories: GPU time per kernel category per profile, all GPUs together.
--
-- profile_id: the profile (profiles.profile_id).
-- category: gemm, attention, communication, norm, ... or other (kernel_categories.yaml).
-- kernel_names: distinct kernel names in the category.
-- count: kernel executions.
-- total_ns: GPU time, ns.
-- share_pct: share of the profile's kernel time, %.
CREATE TABLE IF NOT EXISTS kernel_categories (
    profile_id VARCHAR,
    category VARCHAR,
    kernel_names BIGINT,
    count BIGINT,
    total_ns BIGINT,
    share_pct DOUBLE
);
