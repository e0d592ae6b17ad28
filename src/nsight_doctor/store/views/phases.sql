-- phases: each GPU's activity window split into phases, in time order, so that a diagnosis
-- judges the steady state rather than start-up and warm-up.
-- - startup: before the first step (module loads, weight copies, allocator growth, graph
--   capture); without steps, before the first kernel, and the whole window of a GPU that ran no
--   kernel and fewer than 1,000 operations (copies and memsets only: a program that stopped in
--   start-up).
-- - warmup: leading steps more than 3 times as long as the median step, with the GPU busy less
--   than half as much of the time (first-call overhead: library initialisation, compilation).
-- - prefill, decode, mixed: runs of steps. A step's kind comes from its NVTX range where that
--   says it (steps.kind_hint); otherwise a step is "different" when at least 30% of its
--   kernels (name and grid) occur in fewer than half of the steps, or its GPU busy time is at
--   least twice the median step's: the first step of a stretch that is different is a prefill,
--   later different steps are mixed (continuous batching adds prompts to running decodes), and
--   the other steps are decode when a different step came before them or their GEMMs are
--   short (mean under 30 us: weight streaming), prefill when their GEMMs are long (mean 100 us
--   or more) and the GPU is busy 80% of the step or more, else steady.
-- - steady: steady work whose steps are not found or not of a known kind; without steps, a
--   stretch in which the GPU waited for new code (idle gaps of cause setup in gpu_gaps) at
--   least half the time is warmup instead.
-- - idle: a gap of at least 100 ms and 10 median steps (or, without steps, 10% of the window)
--   splits the stretches around it; such a gap spent in one-time work (gpu_gaps.cause setup:
--   compiling and loading a kernel, building a graph) is warmup instead, and so is the steady
--   work before it when there is less of it than the gap lasted: the first pass, whose first
--   launch of a kernel triggered the compilation.
--
-- device_id: CUDA device id.
-- phase: phase number on this GPU, from 1, in time order.
-- name: startup, warmup, prefill, decode, mixed, steady or idle.
-- start: phase start, ns.
-- end: phase end, ns.
-- duration: end - start, ns.
-- source: nvtx when the phase's steps and their kind come from NVTX ranges, else inferred.
-- steps: steps in the phase, NULL for phases without steps (a piece that idle stretches cut
--   from a phase counts its own: each step goes with the piece in which it ends, and a piece
--   in which none ends has NULL).
-- step_ns_median: median step time, ns (for decode, the time per output token).
-- step_ns_p90: 90th percentile of the step time, ns.
-- busy_ns: GPU busy time in the phase (gpu_busy clipped to it), ns.
-- busy_pct: busy_ns as % of duration.
-- steady: whether the phase is steady work (prefill, decode, mixed or steady): what findings
--   are measured on.
CREATE TABLE phases AS
WITH act AS (
    SELECT device_id, start AS w0, "end" AS w1, window_ns FROM gpu_activity
), no_steps AS (
    SELECT a.* FROM act a WHERE a.device_id NOT IN (SELECT device_id FROM steps)
), setup_end AS (
    -- Without steps, start-up is what came before the first kernel (uploads, allocation,
    -- set-up); a GPU that ran no kernel and few operations did nothing but start-up.
    SELECT n.device_id,
           coalesce((SELECT min(o.start) FROM gpu_ops o WHERE o.device_id = n.device_id AND o.kind IN ('kernel', 'graph')),
                    CASE WHEN (SELECT count(*) FROM gpu_ops o WHERE o.device_id = n.device_id) < 1000 THEN n.w1 END) AS e
    FROM no_steps n
), st AS (
    SELECT s.*,
           median(duration) OVER (PARTITION BY device_id) AS med_dur,
           median(busy_ns / nullif(duration, 0)) OVER (PARTITION BY device_id) AS med_share,
           median(busy_ns) OVER (PARTITION BY device_id) AS med_busy
    FROM steps s
), k AS (
    -- sig: a kernel by name and grid, as a hash (cheaper than its text for millions of kernels)
    -- (NULL when a part is: such kernels match no signature, as their text did)
    SELECT s.device_id, s.step,
           CASE WHEN k.name IS NOT NULL AND k.grid_x IS NOT NULL AND k.grid_y IS NOT NULL AND k.grid_z IS NOT NULL
                THEN hash(k.name, k.grid_x, k.grid_y, k.grid_z) END AS sig,
           k.category, k.duration
    FROM kernels k ASOF JOIN steps s ON s.device_id = k.device_id AND k.start >= s.start
    WHERE k.start < s."end"
), sig_steps AS (
    SELECT device_id, sig, count(DISTINCT step) AS in_steps FROM k GROUP BY ALL
), novelty AS (
    SELECT k.device_id, k.step,
           count(*) FILTER (WHERE g.in_steps < 0.5 * n.n) / count(*) AS novel_share
    FROM k JOIN sig_steps g USING (device_id, sig)
    JOIN (SELECT device_id, count(*) AS n FROM steps GROUP BY device_id) n USING (device_id)
    GROUP BY ALL
), warm AS (
    SELECT st.*, coalesce(v.novel_share, 0) AS novel_share,
           bool_and(st.duration > 3 * st.med_dur AND st.busy_ns / nullif(st.duration, 0) < 0.5 * st.med_share)
               OVER (PARTITION BY st.device_id ORDER BY st.step ROWS UNBOUNDED PRECEDING) AS warmup
    FROM st LEFT JOIN novelty v USING (device_id, step)
), idle_gaps AS (
    -- Idle stretches: long gaps after the first step, or without steps after start-up (idle
    -- time in start-up is start-up's).
    SELECT g.device_id, g.start, g."end", CASE WHEN g.cause = 'setup' THEN 'warmup' ELSE 'idle' END AS name
    FROM gpu_gaps g JOIN act a USING (device_id)
    LEFT JOIN (SELECT device_id, min(start) AS s0, any_value(med_dur) AS med_dur FROM st GROUP BY device_id) f
      USING (device_id)
    LEFT JOIN setup_end e USING (device_id)
    WHERE g.duration >= 100000000
      AND g.duration >= CASE WHEN f.med_dur IS NOT NULL THEN 10 * f.med_dur ELSE 0.1 * a.window_ns END
      AND g.start >= coalesce(f.s0, e.e, a.w0)
), seg AS (
    -- Stretches of non-warm-up steps between idle stretches.
    SELECT w.*, (SELECT count(*) FROM idle_gaps i WHERE i.device_id = w.device_id AND i."end" <= w.start) AS segment,
           w.novel_share >= 0.3 OR (w.busy_ns >= 2 * w.med_busy AND w.busy_ns - w.med_busy >= 0.2 * w.med_dur) AS different
    FROM warm w WHERE NOT w.warmup
), gemm AS (
    SELECT k.device_id, avg(k.duration) FILTER (WHERE k.category = 'gemm') AS gemm_mean
    FROM k JOIN seg USING (device_id, step) GROUP BY k.device_id
), seg_stats AS (
    SELECT device_id, segment, min(step) AS first_step,
           bool_or(kind_hint IS NOT NULL) AS hinted,
           min(step) FILTER (WHERE different AND step > (SELECT min(step) FROM seg s2 WHERE s2.device_id = seg.device_id AND s2.segment = seg.segment)) AS first_mixed,
           max(step) FILTER (WHERE different AND step > (SELECT min(step) FROM seg s2 WHERE s2.device_id = seg.device_id AND s2.segment = seg.segment)) AS last_mixed,
           min(step) FILTER (WHERE NOT different) AS first_light,
           count(*) FILTER (WHERE NOT different) AS light_steps,
           count(*) FILTER (WHERE different) AS different_steps,
           max(step) FILTER (WHERE NOT different) AS last_light,
           median(busy_ns / nullif(duration, 0)) FILTER (WHERE NOT different) AS light_share
    FROM seg GROUP BY device_id, segment
), kinds AS (
    SELECT s.device_id, s.step, s.start, s."end", s.duration, s.busy_ns, s.segment, s.source,
           coalesce(s.kind_hint,
               CASE
                   WHEN s.step = t.first_step AND s.different THEN 'prefill'
                   WHEN s.different THEN 'mixed'
                   -- Light steps among recurring different steps: decodes running beside prefills.
                   WHEN t.first_mixed IS NOT NULL AND t.first_light < t.last_mixed
                        AND t.different_steps >= 0.1 * t.light_steps THEN 'mixed'
                   WHEN (SELECT bool_or(x.different) FROM seg x WHERE x.device_id = s.device_id
                         AND x.segment = s.segment AND x.step < s.step) THEN 'decode'
                   WHEN g.gemm_mean < 30000 THEN 'decode'
                   WHEN g.gemm_mean >= 100000 AND t.light_share >= 0.8 THEN 'prefill'
                   ELSE 'steady'
               END) AS kind
    FROM seg s JOIN seg_stats t USING (device_id, segment) LEFT JOIN gemm g USING (device_id)
), runs AS (
    SELECT *, sum(CASE WHEN kind IS DISTINCT FROM prev_kind OR segment IS DISTINCT FROM prev_segment THEN 1 ELSE 0 END)
                  OVER (PARTITION BY device_id ORDER BY step ROWS UNBOUNDED PRECEDING) AS run,
              -- A step that holds an idle stretch is left out of the step times.
              EXISTS (SELECT 1 FROM idle_gaps i WHERE i.device_id = kinds.device_id
                      AND i.start >= kinds.start AND i."end" <= kinds."end") AS interrupted
    FROM (SELECT *, lag(kind) OVER (PARTITION BY device_id ORDER BY step) AS prev_kind,
                 lag(segment) OVER (PARTITION BY device_id ORDER BY step) AS prev_segment
          FROM kinds) kinds
), step_phases AS (
    -- (their step counts and times are the pieces', below)
    SELECT device_id, run, kind AS name, min(start) AS start, max("end") AS "end",
           CASE WHEN bool_and(source = 'nvtx') THEN 'nvtx' ELSE 'inferred' END AS source
    FROM runs GROUP BY device_id, run, kind
    UNION ALL
    SELECT device_id, -1, 'warmup', min(start), max("end"),
           CASE WHEN bool_and(source = 'nvtx') THEN 'nvtx' ELSE 'inferred' END
    FROM warm WHERE warmup GROUP BY device_id
), framed AS (
    SELECT row_number() OVER () AS id, * FROM (
        SELECT device_id, run, name, start, "end", source FROM step_phases
        UNION ALL
        -- Start-up: from the first operation to the first step (or the end of one-time work).
        SELECT a.device_id, NULL, 'startup', a.w0, coalesce(f.s0, e.e), 'inferred'
        FROM act a
        LEFT JOIN (SELECT device_id, min(start) AS s0 FROM steps GROUP BY device_id) f USING (device_id)
        LEFT JOIN setup_end e USING (device_id)
        WHERE coalesce(f.s0, e.e) > a.w0
        UNION ALL
        -- Without steps: the rest is steady work.
        SELECT n.device_id, NULL, 'steady', coalesce(e.e, n.w0), n.w1, 'inferred'
        FROM no_steps n LEFT JOIN setup_end e USING (device_id)
        WHERE n.w1 > coalesce(e.e, n.w0)
        UNION ALL
        -- After the last step, a tail longer than a median step is steady work of its own.
        SELECT a.device_id, NULL, 'steady', l.e1, a.w1, 'inferred'
        FROM act a JOIN (SELECT device_id, max("end") AS e1, any_value(med_dur) AS med_dur FROM st GROUP BY device_id) l
          USING (device_id)
        WHERE a.w1 - l.e1 > l.med_dur)
), extended AS (
    -- A short tail after the last step (drained copies, final kernels) belongs to the last phase.
    SELECT f.id, f.device_id, f.run, f.name, f.start,
           CASE WHEN f."end" = l.e1 AND a.w1 - l.e1 <= l.med_dur THEN a.w1 ELSE f."end" END AS "end",
           f.source
    FROM framed f JOIN act a USING (device_id)
    LEFT JOIN (SELECT device_id, max("end") AS e1, any_value(med_dur) AS med_dur FROM st GROUP BY device_id) l
      USING (device_id)
), cuts AS (
    SELECT f.id, i.start, i."end" FROM extended f
    JOIN idle_gaps i ON i.device_id = f.device_id AND i.start >= f.start AND i."end" <= f."end"
), piece_starts AS (
    SELECT id, start AS s, row_number() OVER (PARTITION BY id ORDER BY start) AS n FROM (
        SELECT id, start FROM extended UNION ALL SELECT id, "end" FROM cuts)
), piece_ends AS (
    SELECT id, e, row_number() OVER (PARTITION BY id ORDER BY e) AS n FROM (
        SELECT id, "end" AS e FROM extended UNION ALL SELECT id, start FROM cuts)
), cut_pieces AS (
    SELECT f.device_id, f.run, f.name, p.s AS start, q.e AS "end", f.source
    FROM extended f JOIN piece_starts p USING (id) JOIN piece_ends q ON q.id = p.id AND q.n = p.n
), step_rows AS (
    -- last_ns: the step's last nanosecond (its start when it has no length).
    SELECT device_id, run, duration, interrupted, greatest("end" - 1, start) AS last_ns FROM runs
    UNION ALL
    SELECT device_id, -1, duration, false, greatest("end" - 1, start) FROM warm WHERE warmup
), piece_steps AS (
    -- Each piece of a phase with its own steps, each step in the last piece of its run that
    -- begins before it ends: a phase that idle stretches cut into pieces does not repeat its
    -- count on every piece, and a step that holds an idle stretch goes with the piece after it.
    SELECT c.device_id, c.run, c.start, count(*) AS steps,
           median(s.duration) FILTER (WHERE NOT s.interrupted) AS step_ns_median,
           quantile_cont(s.duration, 0.9) FILTER (WHERE NOT s.interrupted) AS step_ns_p90
    FROM step_rows s ASOF JOIN (SELECT * FROM cut_pieces WHERE "end" > start) c
      ON c.device_id = s.device_id AND c.run = s.run AND s.last_ns >= c.start
    GROUP BY ALL
), pieces AS (
    -- The phases with the idle stretches inside them cut out, and the idle stretches.
    SELECT c.device_id, c.name, c.start, c."end", c.source, s.steps, s.step_ns_median, s.step_ns_p90
    FROM cut_pieces c LEFT JOIN piece_steps s ON s.device_id = c.device_id AND s.run = c.run AND s.start = c.start
    UNION ALL
    SELECT device_id, name, start, "end", 'inferred', NULL, NULL, NULL FROM idle_gaps
), first_pass AS (
    -- The last compile stretch (warmup idle stretch) with less steady work before it than its
    -- own length: everything before it is the first pass.
    SELECT i.device_id, max(i.start) AS until
    FROM idle_gaps i
    WHERE i.name = 'warmup'
      AND (SELECT coalesce(sum(p."end" - p.start), 0) FROM pieces p
           WHERE p.device_id = i.device_id AND p."end" <= i.start
             AND p.name IN ('prefill', 'decode', 'mixed', 'steady')) < i."end" - i.start
    GROUP BY i.device_id
), setup_idle AS (
    -- Without steps: the idle time of each piece of steady work spent in one-time work
    -- (gpu_gaps.cause setup: compiling and loading code, building graphs).
    SELECT p.device_id, p.start, sum(least(g."end", p."end") - greatest(g.start, p.start)) AS setup_ns
    FROM pieces p SEMI JOIN no_steps n ON n.device_id = p.device_id
    JOIN gpu_gaps g ON g.device_id = p.device_id AND g.cause = 'setup' AND g.start < p."end" AND g."end" > p.start
    WHERE p.name = 'steady'
    GROUP BY ALL
), named AS (
    SELECT p.device_id,
           CASE WHEN p.name IN ('prefill', 'decode', 'mixed', 'steady') AND p."end" <= f.until THEN 'warmup'
                -- (the GPU waited for new code at least half the time: still warming up)
                WHEN p.name = 'steady' AND 2 * coalesce(si.setup_ns, 0) >= p."end" - p.start THEN 'warmup'
                ELSE p.name END AS name,
           p.start, p."end", p.source, p.steps, p.step_ns_median, p.step_ns_p90
    FROM pieces p LEFT JOIN first_pass f USING (device_id)
    LEFT JOIN setup_idle si ON si.device_id = p.device_id AND si.start = p.start
), busy AS (
    SELECT c.device_id, c.start, c.name,
           coalesce(sum(least(b."end", c."end") - greatest(b.start, c.start)) FILTER (WHERE b.start IS NOT NULL), 0) AS busy_ns
    FROM named c LEFT JOIN gpu_busy b ON b.device_id = c.device_id AND b.start < c."end" AND b."end" > c.start
    GROUP BY ALL
)
SELECT c.device_id, row_number() OVER (PARTITION BY c.device_id ORDER BY c.start, c."end") AS phase,
       c.name, c.start, c."end", c."end" - c.start AS duration, c.source, c.steps,
       c.step_ns_median, c.step_ns_p90, b.busy_ns,
       100.0 * b.busy_ns / nullif(c."end" - c.start, 0) AS busy_pct,
       c.name IN ('prefill', 'decode', 'mixed', 'steady') AS steady
FROM named c JOIN busy b USING (device_id, start, name)
WHERE c."end" > c.start
ORDER BY c.device_id, phase;
