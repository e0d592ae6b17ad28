-- nvtx_ranges: NVTX ranges (push/pop and start/end); marks and unfinished ranges are left out.
--
-- range_id: id of the range (joins nvtx_gpu).
-- start: range start on the CPU, ns.
-- end: range end, ns.
-- duration: end - start, ns.
-- pid: operating-system process id.
-- tid: thread id.
-- text: the range's message.
-- domain: the NVTX domain name (NULL for the default domain).
-- library: whether a library opened the range around its own work rather than the program
--   (domain CCCL: CUB's and Thrust's algorithms; NCCL: its collectives; cuBLAS and cuDNN: their
--   API calls, which nsys -t cublas,cudnn records as ranges).
-- kind: push_pop or start_end.
-- depth: nesting level among push/pop ranges of the same thread (0 = outermost); for
--   start/end ranges, the number of ranges of the same process open when it began.
CREATE VIEW nvtx_ranges AS
SELECT * EXCLUDE (scope_tid) FROM nvtx_ranges_t;
