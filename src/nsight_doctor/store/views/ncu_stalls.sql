-- ncu_stalls: warp-stall reasons of each kernel, as average warps stalled per issued
-- instruction (ncu's smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio).
--
-- action_id: the profiled kernel (ncu_kernels).
-- kernel: its short name.
-- reason: long_scoreboard, short_scoreboard, mio_throttle, lg_throttle, math_pipe_throttle,
--   barrier, membar, wait, not_selected, selected, no_instruction, imc_miss, dispatch_stall,
--   drain, branch_resolving, sleeping, tex_throttle, misc, gmma, ... as the report has them.
-- ratio: warps stalled for this reason per issued instruction.
CREATE VIEW ncu_stalls AS
SELECT s.action_id, a.name AS kernel, s.reason, s.ratio
FROM base_ncu_stalls s JOIN base_ncu_actions a USING (action_id);
