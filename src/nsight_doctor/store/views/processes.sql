-- processes: the processes of the capture.
--
-- pid: the operating system's process id.
-- name: the process name.
CREATE VIEW processes AS
SELECT pid, name FROM base_processes;
