-- ncu_speedups: Nsight Compute's estimated speedups, per kernel group and problem category,
-- taken from its rule results (the largest global estimate, else the largest local one).
--
-- launch: the kernel group (ncu_groups.launch).
-- category: small_grid (LaunchConfiguration), occupancy (AchievedOccupancy, TheoreticalOccupancy, Occupancy), issue (IssueSlotUtilization, CPIStall), uncoalesced (UncoalescedGlobalAccess), bank_conflicts (UncoalescedSharedAccess, SharedMemoryConflicts), memory (MemoryCacheAccessPattern), compute (HighPipeUtilization, FPInstructions), spills (RegisterSpilling).
-- speedup_pct: the estimated speedup, % of the kernel's time.
-- speedup_type: global (run time of the kernel) or local (efficiency of one unit).
-- rules: the ncu rules that gave estimates, comma-separated.
CREATE VIEW ncu_speedups AS
WITH cat(rule_id, category) AS (
    VALUES ('LaunchConfiguration', 'small_grid'), ('AchievedOccupancy', 'occupancy'),
           ('TheoreticalOccupancy', 'occupancy'), ('Occupancy', 'occupancy'),
           ('IssueSlotUtilization', 'issue'), ('CPIStall', 'issue'),
           ('UncoalescedGlobalAccess', 'uncoalesced'), ('UncoalescedSharedAccess', 'bank_conflicts'),
           ('SharedMemoryConflicts', 'bank_conflicts'), ('MemoryCacheAccessPattern', 'memory'),
           ('HighPipeUtilization', 'compute'), ('FPInstructions', 'compute'), ('RegisterSpilling', 'spills')
), r AS (
    SELECT k.launch, c.category, r.rule_id, r.speedup_pct, r.speedup_type
    FROM base_ncu_rules r JOIN ncu_kernels k USING (action_id) JOIN cat c USING (rule_id)
    WHERE r.speedup_pct IS NOT NULL AND r.speedup_pct > 0
)
SELECT launch, category,
       coalesce(max(speedup_pct) FILTER (WHERE speedup_type = 'global'), max(speedup_pct)) AS speedup_pct,
       CASE WHEN count(*) FILTER (WHERE speedup_type = 'global') > 0 THEN 'global' ELSE 'local' END AS speedup_type,
       string_agg(DISTINCT rule_id, ', ' ORDER BY rule_id) AS rules
FROM r GROUP BY launch, category;
