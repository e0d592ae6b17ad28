-- summary_ncu_stalls: the warp-stall mix of each profiled launch configuration (ncu_groups):
-- each stall reason (ncu_stalls) averaged over the configuration's profiled instances, and its
-- share of all their stalls; 'selected' (issuing) is not a stall and is left out. Most stalls
-- first.
--
-- launch: name<<<(grid),(block)>>> (ncu_groups.launch).
-- reason: the stall reason (see ncu_stalls).
-- ratio: mean warps stalled for this reason per issued instruction.
-- share_pct: ratio as % of the configuration's stalls (all reasons but selected).
CREATE VIEW summary_ncu_stalls AS
WITH r AS (
    SELECT k.launch, s.reason, avg(s.ratio) AS ratio
    FROM ncu_kernels k JOIN ncu_stalls s USING (action_id)
    WHERE s.reason <> 'selected'
    GROUP BY k.launch, s.reason HAVING avg(s.ratio) > 0
)
SELECT launch, reason, ratio, 100.0 * ratio / sum(ratio) OVER (PARTITION BY launch) AS share_pct
FROM r ORDER BY launch, ratio DESC, reason;
