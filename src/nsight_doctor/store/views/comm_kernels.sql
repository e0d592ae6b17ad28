-- comm_kernels: collective-communication kernels (NCCL, custom all-reduce), matched across
-- GPUs: the k-th launch of a collective kernel on each GPU is the same collective. A rank's
-- time in a collective is the transfer, which every rank spends, plus the time it waited for
-- the last rank to arrive.
--
-- device_id: CUDA device id.
-- pid: process (rank) that launched it.
-- stream_id: CUDA stream: communication on the compute stream cannot overlap with compute.
-- name: kernel name, e.g. ncclDevKernel_AllReduce_Sum_bf16_RING_LL.
-- op: AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, AllToAll, SendRecv, or NULL.
-- seq: order of this collective among the same kernel's launches on this GPU (1 = first).
-- start: start on the GPU, ns.
-- end: end, ns.
-- duration: end - start, ns.
-- ranks: GPUs on which the same collective (name and seq) ran.
-- transfer_ns: the shortest duration among those GPUs: the collective's own time.
-- wait_ns: duration - transfer_ns: time this GPU waited inside the collective for a slower one.
-- last_to_arrive: whether this GPU started the collective last (the others waited for it).
-- exposed_ns: part of the duration during which no other kernel ran on this GPU.
-- exposed_wait_ns: the waiting in exposed_ns: exposed_ns * wait_ns / duration (the rest of
--   the waiting ran beside other kernels and cost no time). What balanced ranks would save, ns.
CREATE TABLE comm_kernels AS
WITH c AS (
    SELECT device_id, pid, stream_id, start, "end", duration, name,
           nullif(regexp_extract(name, '(AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|AllToAll|SendRecv)', 1), '') AS op,
           row_number() OVER (PARTITION BY device_id, name ORDER BY start) AS seq
    FROM kernels WHERE category = 'communication'
), m AS (
    SELECT name, seq, count(*) AS ranks, min(duration) AS transfer_ns, max(start) AS last_start
    FROM c GROUP BY name, seq
), other AS (
    -- Busy intervals of every other kernel on each GPU that ran collectives (none at all in
    -- most captures: then this costs nothing).
    SELECT device_id, start, "end",
           max("end") OVER (PARTITION BY device_id ORDER BY start, "end"
                            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
    FROM kernels WHERE category <> 'communication' AND device_id IN (SELECT DISTINCT device_id FROM c)
), isl AS (
    SELECT device_id, min(start) AS s, max("end") AS e
    FROM (SELECT *, sum(CASE WHEN prev_end IS NULL OR start > prev_end THEN 1 ELSE 0 END)
                    OVER (PARTITION BY device_id ORDER BY start, "end" ROWS UNBOUNDED PRECEDING) AS i
          FROM other)
    GROUP BY device_id, i
), cov AS (
    SELECT device_id, s, e,
           coalesce(sum(e - s) OVER (PARTITION BY device_id ORDER BY s
                    ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before
    FROM isl
), a1 AS (
    SELECT c.*, v.before + least(greatest(c."end" - v.s, 0), v.e - v.s) AS f_end
    FROM c ASOF LEFT JOIN cov v ON v.device_id = c.device_id AND c."end" >= v.s
), a2 AS (
    SELECT a1.*, v.before + least(greatest(a1.start - v.s, 0), v.e - v.s) AS f_start
    FROM a1 ASOF LEFT JOIN cov v ON v.device_id = a1.device_id AND a1.start >= v.s
), a3 AS (
    SELECT a2.*, a2.duration - (coalesce(a2.f_end, 0) - coalesce(a2.f_start, 0)) AS exposed_ns FROM a2
)
SELECT a.device_id, a.pid, a.stream_id, a.name, a.op, a.seq, a.start, a."end", a.duration,
       m.ranks,
       CASE WHEN m.ranks > 1 THEN m.transfer_ns ELSE a.duration END AS transfer_ns,
       CASE WHEN m.ranks > 1 THEN a.duration - m.transfer_ns ELSE 0 END AS wait_ns,
       m.ranks > 1 AND a.start = m.last_start AS last_to_arrive,
       a.exposed_ns,
       CASE WHEN m.ranks > 1 THEN coalesce(a.exposed_ns * (a.duration - m.transfer_ns) / nullif(a.duration, 0), 0)
            ELSE 0 END AS exposed_wait_ns
FROM a3 a JOIN m USING (name, seq);
