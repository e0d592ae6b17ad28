-- threads: the named threads of the capture.
--
-- global_tid: nsys's thread id, which packs the process and thread ids.
-- pid: process id, (global_tid >> 24) & 0xFFFFFF.
-- tid: thread id, global_tid & 0xFFFFFF.
-- name: the thread name.
CREATE VIEW threads AS
SELECT t.global_tid,
       (t.global_tid >> 24) & 16777215 AS pid,
       t.global_tid & 16777215 AS tid,
       s.value AS name
FROM base_threads t LEFT JOIN base_strings s ON s.id = t.name_id;
