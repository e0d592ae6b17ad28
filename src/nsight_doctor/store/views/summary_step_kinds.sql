-- summary_step_kinds: each GPU's steady steps by the kind of the phase they ran in (phases):
-- the decode step time apart from the prefill steps. Steps that hold an idle stretch are left
-- out, as in steady_state.
--
-- device_id: CUDA device id.
-- kind: prefill, decode, mixed or steady.
-- steps: steps.
-- step_ns_median: median step time, ns (for decode, the time per output token).
-- step_ns_p90: 90th percentile of the step time, ns.
-- busy_ns: GPU busy time in these steps, ns.
CREATE VIEW summary_step_kinds AS
SELECT st.device_id, ph.name AS kind, count(*) AS steps, median(st.duration) AS step_ns_median,
       quantile_cont(st.duration, 0.9) AS step_ns_p90, sum(st.busy_ns) AS busy_ns
FROM steps st JOIN phases ph ON ph.device_id = st.device_id AND ph.steady
     AND st.start >= ph.start AND st."end" <= ph."end"
GROUP BY st.device_id, ph.name ORDER BY st.device_id, steps DESC, kind;
