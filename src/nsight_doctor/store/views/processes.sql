-- processes: the processes of the capture.
--
-- global_pid: nsys's process id (pid << 24, plus the vm id above).
-- pid: the operating system's process id.
-- name: the process name.
CREATE VIEW processes AS
SELECT global_pid, pid, name FROM base_processes;
