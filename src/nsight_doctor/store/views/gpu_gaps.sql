-- gpu_gaps: idle intervals of each GPU between two busy intervals (gpu_busy), each with one
-- cause: what the CPU of the process that issued the next operation did for most of the gap.
--
-- device_id: CUDA device id.
-- start: gap start (the GPU went idle), ns.
-- end: gap end (the next operation started), ns.
-- duration: end - start, ns.
-- pid: process that issued the operation that ended the gap.
-- next_op: name of the operation that ended the gap.
-- next_kind: its kind: kernel, graph, memcpy or memset.
-- launch_name: the API call that issued it (NULL when not traced).
-- launch_start: when that call began on the CPU, ns.
-- launch_end: when that call returned, ns.
-- first_launch: whether the operation that ended the gap is the first execution of its kernel
--   on this GPU.
-- blocking_name: the blocking call (blocking_calls) of that process, waiting for this GPU or an
--   unknown one, that returned in the first half of the gap, if any.
-- blocking_end: when it returned, ns.
-- blocking_reason: its reason (sync, sync_copy, pageable_copy or sync_memset).
-- one_time_ns: CPU time, within the gap, in one-time CUDA work (api_calls.one_time: loading
--   code, building graphs, creating streams and events, pinning host memory), ns; gaps of
--   100 us or more only, else NULL (as for the next three columns).
-- module_ns: CPU time within the gap in loading code (cuModuleLoad*, cuLibraryLoad*, cuLink*),
--   ns; gaps of 100 us or more only.
-- alloc_ns: CPU time within the gap in device memory allocation calls, ns.
-- copy_ns: CPU time within the gap in copy and memset calls that do not block (e.g. staging
--   pageable host data), ns.
-- other_api_ns: CPU time within the gap in other CUDA calls (launches and blocking calls
--   excluded), ns.
-- top_api: the CUDA call with the most time in the gap, if any (gaps of 100 us or more).
-- cause: launch (a per-operation launch cost: the GPU finished before the CPU issued the next
--   operation, in a gap under 100 us or one spent mostly inside the launch call of the next
--   kernel or graph, such as a CUDA graph launch; or, launch_side gpu, the next operation was already issued and the
--   gap is under 20 us: the GPU's own cost between operations), queued (the
--   next operation was already issued, and the GPU waited at least 20 us for something else:
--   another stream, an event, another process), setup (a gap of 100 us or more, at least half
--   of it in one-time CUDA work; or a gap of 1 ms or more before a kernel's first execution
--   with a module load in it or a launch call lasting half of it: compiling and loading the
--   kernel, as Triton's JIT or lazy loading do; or a gap of 1 ms or more, not a sync gap
--   (below), in which code was loaded (module_ns > 0): a new variant of a kernel
--   that ran before, compiled for new shapes, as cuDNN's SDPA does per sequence length), api (at least half in other CUDA calls: allocation,
--   non-blocking copies, ...), sync (a blocking call returned in the first half of a gap under
--   10 ms: the GPU drained and waited for the CPU to refill it), or cpu (a gap of 100 us or
--   more with the CPU mostly outside CUDA: host code).
-- launch_side: for launch gaps, cpu (the CPU issued the operation late) or gpu; else NULL.
-- readback_bytes: when the gap began with a device-to-host copy finishing (the GPU's last
--   operation before it), the bytes of that copy; else NULL.
-- after_readback: readback_bytes is 32 KiB or more: the host received more than a few scalars
--   (the logits of one sequence over a 16 k vocabulary in bf16 are 32 KB, over 32 k 64 KB) and
--   the GPU waited while it worked on them. host-sampling claims these gaps (of cause cpu, api
--   or sync) in the steady state: steady_gaps.claimed_by.
CREATE TABLE gpu_gaps AS
WITH b AS (
    SELECT device_id, start, "end",
           lead(start) OVER w AS next_start,
           lead(first_correlation_id) OVER w AS next_corr,
           lead(first_pid) OVER w AS next_pid,
           last_correlation_id AS prev_corr,
           last_pid AS prev_pid
    FROM gpu_busy WINDOW w AS (PARTITION BY device_id ORDER BY start)
), readbacks AS (
    -- (correlation ids are unique within a process)
    SELECT device_id, pid, correlation_id, max(bytes) AS bytes FROM memcpy
    WHERE direction IN ('DtoH', 'AtoH') GROUP BY ALL
), g AS (
    SELECT b.device_id, b."end" AS start, b.next_start AS "end", b.next_start - b."end" AS duration,
           b.next_corr, b.next_pid AS pid, nb.first_name AS next_op, nb.first_kind AS next_kind, r.bytes AS readback_bytes,
           b."end" + (b.next_start - b."end") // 2 AS mid
    -- (the next interval's name and kind by a join: carried through the window above, their
    -- text cost more than the join)
    FROM b JOIN gpu_busy nb ON nb.device_id IS NOT DISTINCT FROM b.device_id AND nb.start = b.next_start
    LEFT JOIN readbacks r ON r.device_id = b.device_id AND r.correlation_id = b.prev_corr
         AND r.pid IS NOT DISTINCT FROM b.prev_pid
    WHERE b.next_start IS NOT NULL
), firsts AS (
    -- The first execution of each kernel name on each GPU.
    SELECT device_id, name, min(start) AS start FROM gpu_ops WHERE kind = 'kernel' GROUP BY ALL
), l AS (
    -- (the calls' names joined after the calls matched: millions of calls, fewer gaps)
    SELECT g.*, n.name AS launch_name, a.start AS launch_start, a."end" AS launch_end,
           n.category IN ('launch', 'graph_launch') AS is_launch, f.start IS NOT NULL AS first_launch
    FROM g LEFT JOIN base_api_calls a ON a.correlation_id = g.next_corr AND a.pid = g.pid
    LEFT JOIN api_names_t n ON n.name_id = a.name_id
    LEFT JOIN firsts f ON f.device_id = g.device_id AND f.name = g.next_op AND f.start = g."end"
), bc AS (
    -- Each blocking call once per GPU it may have waited for: its own, or every GPU of its
    -- process when the trace does not say.
    SELECT c.pid, coalesce(c.device_id, d.device_id) AS device_id, c.name, c."end", c.reason
    FROM blocking_calls c LEFT JOIN process_gpus d ON c.device_id IS NULL AND d.pid = c.pid
), returned AS (
    -- The last blocking call of the gap's process that returned in the first half of the gap.
    -- Looked up from the calls' side (each call in the last gap of its process and GPU that
    -- began before it returned): there are far fewer calls than gaps.
    -- (one call's name and reason; a tie on the end goes to the greater name, as in top_api)
    SELECT g.device_id, g.start, max(c."end") AS bc_end,
           arg_max({'name': c.name, 'reason': c.reason}, (c."end", c.name)) AS bc
    FROM bc c ASOF JOIN (SELECT pid, device_id, start, mid FROM g) g
        ON g.pid = c.pid AND g.device_id = c.device_id AND c."end" >= g.start
    WHERE c."end" <= g.mid
    GROUP BY ALL
), k AS MATERIALIZED (
    SELECT l.*, r.bc.name AS bc_name, r.bc_end, r.bc.reason AS bc_reason
    FROM l LEFT JOIN returned r ON r.device_id = l.device_id AND r.start = l.start
), long_gaps AS (
    SELECT device_id, start, "end", duration, pid FROM k WHERE duration >= 100000
), candidate_calls AS (
    -- The CUDA calls that may fill a gap: launches and the calls that blocked are counted
    -- elsewhere.
    SELECT c.pid, c.name_id, c.start, c."end"
    FROM base_api_calls c JOIN api_names_t n ON n.name_id = c.name_id
    LEFT JOIN blocking_calls x ON x.pid = c.pid AND x.tid = c.tid AND x.start = c.start
    WHERE n.category NOT IN ('launch', 'graph_launch', 'sync') AND x.start IS NULL
), gap_islands AS (
    -- The long gaps of each process, merged where they overlap (a process may drive several
    -- GPUs), so that the last one to begin before a call is the only one it can begin in.
    SELECT pid, start, "end",
           sum(CASE WHEN prev_end IS NULL OR start > prev_end THEN 1 ELSE 0 END)
               OVER (PARTITION BY pid ORDER BY start, "end" ROWS UNBOUNDED PRECEDING) AS island
    FROM (SELECT pid, start, "end",
                 max("end") OVER (PARTITION BY pid ORDER BY start, "end"
                                  ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
          FROM long_gaps)
), pid_gaps AS (
    SELECT pid, start, "end", lead(start) OVER (PARTITION BY pid ORDER BY start) AS next_start
    FROM (SELECT pid, min(start) AS start, max("end") AS "end" FROM gap_islands GROUP BY pid, island)
    UNION ALL
    -- Before the first: a call that begins there overlaps a gap only if one begins while it runs.
    SELECT pid, -9223372036854775807, -9223372036854775807, min(start) FROM long_gaps GROUP BY pid
), other_calls AS (
    -- Only the calls that overlap a long gap of their process: they begin inside one, or one
    -- begins while they run (one lookup: the last gap to begin before the call, and the start
    -- of the next). The others add the same amount at both ends of every gap's integral below,
    -- so leaving them out changes no gap's CPU time and spares the windows most calls
    -- (per-launch queries and the like).
    SELECT c.pid, c.name_id, c.start, c."end"
    FROM candidate_calls c ASOF JOIN pid_gaps g ON g.pid = c.pid AND c.start >= g.start
    WHERE c.start < g."end" OR c."end" > g.next_start
), edges AS (
    -- The CPU time of each process in each CUDA call name, as a running integral, so that
    -- the time inside any gap is a difference of two ASOF lookups. (An interval join of gaps
    -- with calls on pid = pid compares every gap with every call of the process: 17 s instead
    -- of 0.2 s for 500 k kernels.) d: the change in the number of such calls running at t.
    SELECT pid, name_id, t, sum(d) AS d
    FROM (SELECT pid, name_id, start AS t, 1 AS d FROM other_calls
          UNION ALL
          SELECT pid, name_id, "end" AS t, -1 AS d FROM other_calls)
    GROUP BY ALL
), running AS (
    SELECT pid, name_id, t, sum(d) OVER w AS active, lead(t) OVER w - t AS span
    FROM edges WINDOW w AS (PARTITION BY pid, name_id ORDER BY t)
), integral AS (
    -- busy: CPU time in these calls from the first one up to t (several threads add up).
    SELECT pid, name_id, t, active,
           coalesce(sum(active * span) OVER (PARTITION BY pid, name_id ORDER BY t
                                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS busy
    FROM running
), gap_kinds AS (
    SELECT g.device_id, g.start, g."end", g.pid, n.name_id
    FROM long_gaps g JOIN (SELECT DISTINCT pid, name_id FROM edges) n ON n.pid = g.pid
), at_start AS (
    SELECT k.*, i.busy + i.active * (k.start - i.t) AS busy_start
    FROM gap_kinds k ASOF LEFT JOIN integral i ON i.pid = k.pid AND i.name_id = k.name_id AND k.start >= i.t
), cpu AS (
    -- What the CPU of the gap's process was doing during each long gap, by CUDA call.
    SELECT s.device_id, s.start, n.name, n.category, coalesce(n.one_time, false) AS one_time,
           i.busy + i.active * (s."end" - i.t) - coalesce(s.busy_start, 0) AS overlap
    FROM at_start s ASOF JOIN integral i ON i.pid = s.pid AND i.name_id = s.name_id AND s."end" >= i.t
    JOIN api_names_t n ON n.name_id = s.name_id
), a AS (
    SELECT device_id, start,
           coalesce(sum(overlap) FILTER (WHERE one_time), 0) AS one_time_ns,
           coalesce(sum(overlap) FILTER (WHERE regexp_matches(name, '^(cuModuleLoad|cuLibraryLoad|cuLink)')), 0) AS module_ns,
           coalesce(sum(overlap) FILTER (WHERE category = 'alloc'), 0) AS alloc_ns,
           coalesce(sum(overlap) FILTER (WHERE category IN ('memcpy', 'memset')), 0) AS copy_ns,
           coalesce(sum(overlap) FILTER (WHERE category = 'other'), 0) AS other_api_ns,
           arg_max(name, (overlap, name)) AS top_api  -- (a tie goes to the greater name)
    FROM cpu WHERE overlap > 0 GROUP BY ALL
), c AS (
    SELECT k.*,
           CASE WHEN k.duration >= 100000 THEN coalesce(a.one_time_ns, 0) END AS one_time_ns,
           CASE WHEN k.duration >= 100000 THEN coalesce(a.module_ns, 0) END AS module_ns,
           CASE WHEN k.duration >= 100000 THEN coalesce(a.alloc_ns, 0) END AS alloc_ns,
           CASE WHEN k.duration >= 100000 THEN coalesce(a.copy_ns, 0) END AS copy_ns,
           CASE WHEN k.duration >= 100000 THEN coalesce(a.other_api_ns, 0) END AS other_api_ns,
           a.top_api, k.bc_end IS NOT NULL AS synced
    FROM k LEFT JOIN a ON a.device_id = k.device_id AND a.start = k.start
)
SELECT device_id, start, "end", duration, pid, next_op, next_kind, launch_name, launch_start,
       launch_end, first_launch,
       CASE WHEN synced THEN bc_name END AS blocking_name,
       CASE WHEN synced THEN bc_end END AS blocking_end,
       CASE WHEN synced THEN bc_reason END AS blocking_reason,
       one_time_ns, module_ns, alloc_ns, copy_ns, other_api_ns, top_api,
       CASE
           WHEN launch_end IS NOT NULL AND launch_end <= start AND duration < 20000 THEN 'launch'
           WHEN launch_end IS NOT NULL AND launch_end <= start THEN 'queued'
           WHEN duration >= 100000 AND 2 * one_time_ns >= duration THEN 'setup'
           -- Before a kernel's first launch: compiling and loading it (JIT, lazy module loading).
           WHEN duration >= 1000000 AND first_launch
                AND (one_time_ns > 0 OR 2 * (launch_end - launch_start) >= duration) THEN 'setup'
           -- Code loaded in a long gap before a kernel that ran before: a library or JIT compiled
           -- a new variant for new shapes (cuDNN builds an SDPA plan per sequence length,
           -- Triton and torch.compile recompile), most of it on the CPU outside CUDA calls.
           -- It yields only to a short sync gap: a harness that synchronises before each new
           -- shape (Triton's JIT in a benchmark loop) still spends the long gap compiling.
           WHEN duration >= 1000000 AND module_ns > 0 AND NOT (synced AND duration < 10000000) THEN 'setup'
           -- Most of the gap inside the launch call of the next kernel or graph (a graph launch).
           WHEN is_launch AND 2 * (launch_end - greatest(launch_start, start)) >= duration THEN 'launch'
           WHEN duration >= 100000 AND 2 * (alloc_ns + copy_ns + other_api_ns) >= duration THEN 'api'
           WHEN synced AND duration < 10000000 THEN 'sync'
           WHEN duration < 100000 THEN 'launch'
           ELSE 'cpu'
       END AS cause,
       CASE
           WHEN launch_end IS NOT NULL AND launch_end <= start AND duration < 20000 THEN 'gpu'
           WHEN launch_end IS NOT NULL AND launch_end <= start THEN NULL
           WHEN duration >= 100000 AND 2 * one_time_ns >= duration THEN NULL
           WHEN duration >= 1000000 AND first_launch
                AND (one_time_ns > 0 OR 2 * (launch_end - launch_start) >= duration) THEN NULL
           WHEN duration >= 1000000 AND module_ns > 0 AND NOT (synced AND duration < 10000000) THEN NULL
           WHEN is_launch AND 2 * (launch_end - greatest(launch_start, start)) >= duration THEN 'cpu'
           WHEN duration >= 100000 AND 2 * (alloc_ns + copy_ns + other_api_ns) >= duration THEN NULL
           WHEN synced AND duration < 10000000 THEN NULL
           WHEN duration < 100000 THEN 'cpu'
       END AS launch_side,
       readback_bytes, coalesce(readback_bytes >= 32768, false) AS after_readback
FROM c;
