-- ncu_rule_results: Nsight Compute's own rule results for each kernel, kept as evidence.
--
-- action_id: the profiled kernel (ncu_kernels).
-- kernel: its short name.
-- rule_id: ncu's rule identifier, e.g. LaunchConfiguration, AchievedOccupancy.
-- rule_name: the rule's display name.
-- section: the report section the rule belongs to.
-- message_type: ok, optimization, warning, error or none.
-- title: the message title, if any.
-- message: the message, with ncu's link markup removed.
-- speedup_pct: ncu's estimated speedup, in % (NULL when none).
-- speedup_type: global (decrease of the kernel's run time) or local (efficiency of one unit).
-- focus_metrics: JSON list of the metrics the rule looked at.
CREATE VIEW ncu_rule_results AS
SELECT r.action_id, a.name AS kernel, r.rule_id, r.rule_name, r.section, r.message_type, r.title,
       r.message, r.speedup_pct, r.speedup_type, r.focus_metrics
FROM base_ncu_rules r JOIN base_ncu_actions a USING (action_id);
