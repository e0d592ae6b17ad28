-- findings: every finding of every profile, in rank order, as the JSON output gives them
-- (docs/json.md).
--
-- profile_id: the profile (profiles.profile_id).
-- rank: 1 for the finding that would recover the most time.
-- rule_id: the rule that found it (docs/rules).
-- severity: info, low, medium, high or critical.
-- severity_rank: 0 (info) to 4 (critical), for sorting.
-- tags: the rule's tags (docs/tags.md).
-- impact_ns: estimated time a fix would recover, ns (0 for profile-health findings).
-- impact_pct: impact_ns as a share of the profile's GPU activity window, %.
-- device_id: the GPU the finding is about, when the evidence names one.
-- subject: what the finding is about when the evidence names it: a kernel launch
--   configuration, a kernel, an API call or an NVTX range.
-- title: the finding's title, filled with its numbers.
-- message: what was found.
-- recommendation: what to do.
-- evidence: the evidence (JSON), as in the JSON output.
CREATE TABLE IF NOT EXISTS findings (
    profile_id VARCHAR,
    rank INTEGER,
    rule_id VARCHAR,
    severity VARCHAR,
    severity_rank INTEGER,
    tags VARCHAR[],
    impact_ns BIGINT,
    impact_pct DOUBLE,
    device_id INTEGER,
    subject VARCHAR,
    title VARCHAR,
    message VARCHAR,
    recommendation VARCHAR,
    evidence JSON
);
