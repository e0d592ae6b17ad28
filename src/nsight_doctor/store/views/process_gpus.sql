-- process_gpus: each process with each GPU it ran work on (kernels, graphs, copies, memsets):
-- the one definition of which GPUs a process drove, by which its blocking calls, NVTX ranges
-- and idle gaps are attributed. A table, small, so that gpu_ops is scanned once for it.
--
-- pid: operating-system process id.
-- device_id: CUDA device id.
CREATE TABLE process_gpus AS
SELECT DISTINCT pid, device_id FROM gpu_ops;
