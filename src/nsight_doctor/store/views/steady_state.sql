-- steady_state: each GPU's steady state: its steady phases (phases.steady: prefill, decode,
-- mixed or steady work), without start-up, warm-up and idle stretches. Findings about the
-- workload are measured here. No row for a GPU whose whole window is start-up.
--
-- device_id: CUDA device id.
-- start: start of the first steady phase, ns.
-- end: end of the last steady phase, ns.
-- window_ns: the steady phases' total duration, ns: the denominator of the findings'
--   shares.
-- busy_ns: GPU busy time in them, ns.
-- idle_ns: window_ns - busy_ns, ns.
-- busy_pct: busy_ns as % of window_ns.
-- kind: the steady phase kind with the most time: prefill, decode, mixed or steady.
-- steps: steps in the steady phases (NULL when no steps were found).
-- step_ns_median: median step time over them, ns.
-- step_ns_p90: 90th percentile of the step time, ns.
-- window_share_pct: window_ns as % of the GPU's activity window (gpu_activity).
CREATE VIEW steady_state AS
WITH p AS (
    SELECT device_id, min(start) AS start, max("end") AS "end", sum(duration) AS window_ns,
           sum(busy_ns) AS busy_ns, arg_max(name, duration) AS kind
    FROM phases WHERE steady GROUP BY device_id
), s AS (
    -- Steps inside steady phases, without those that hold an idle stretch.
    SELECT st.device_id, count(*) AS steps, median(st.duration) AS step_ns_median,
           quantile_cont(st.duration, 0.9) AS step_ns_p90
    FROM steps st JOIN phases ph ON ph.device_id = st.device_id AND ph.steady
         AND st.start >= ph.start AND st."end" <= ph."end"
    GROUP BY st.device_id
)
SELECT p.device_id, p.start, p."end", p.window_ns, p.busy_ns, p.window_ns - p.busy_ns AS idle_ns,
       100.0 * p.busy_ns / nullif(p.window_ns, 0) AS busy_pct, p.kind,
       s.steps, s.step_ns_median, s.step_ns_p90,
       100.0 * p.window_ns / nullif(a.window_ns, 0) AS window_share_pct
FROM p LEFT JOIN s USING (device_id) JOIN gpu_activity a USING (device_id);
