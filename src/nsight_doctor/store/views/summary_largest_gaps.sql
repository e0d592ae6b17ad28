-- summary_largest_gaps: the idle gaps, longest first (the summary shows the first --gaps).
--
-- device_id: CUDA device id.
-- start: gap start, ns.
-- end: gap end, ns.
-- duration: its length, ns.
-- cause: its cause (see gpu_gaps).
-- pid: process that issued the operation that ended it.
-- next_op: that operation's name.
-- launch_name: the API call that issued it.
-- blocking_name: the blocking call that returned during the gap, if any.
CREATE VIEW summary_largest_gaps AS
SELECT device_id, start, "end", duration, cause, pid, next_op, launch_name, blocking_name
FROM gpu_gaps ORDER BY duration DESC, start;
