-- threads: the named threads of the capture.
--
-- pid: operating-system process id.
-- tid: operating-system thread id.
-- name: the thread name.
CREATE VIEW threads AS
SELECT t.pid, t.tid, s.value AS name
FROM base_threads t LEFT JOIN base_strings s ON s.id = t.name_id;
