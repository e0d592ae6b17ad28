-- gpus: the GPUs of the capture's machine.
--
-- device_id: GPU id in the capture (matches kernels.device_id on single-process captures).
-- name: GPU name, e.g. "NVIDIA H200".
-- chip_name: chip, e.g. "GH100".
-- sm_count: streaming multiprocessors.
-- compute_capability: e.g. "9.0".
-- memory_bandwidth_bytes_per_s: peak DRAM bandwidth, bytes per second.
-- total_memory_bytes: device memory, bytes.
-- l2_cache_bytes: L2 cache size, bytes.
-- clock_rate_hz: SM clock, Hz.
-- bus_location: PCI bus location.
-- uuid: GPU UUID.
CREATE VIEW gpus AS
SELECT device_id, name, chip_name, sm_count,
       CASE WHEN compute_major IS NOT NULL THEN compute_major || '.' || compute_minor END AS compute_capability,
       memory_bandwidth_bytes_per_s, total_memory_bytes, l2_cache_bytes, clock_rate_hz,
       bus_location, uuid
FROM base_gpus;
