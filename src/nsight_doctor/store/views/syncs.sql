-- syncs: CUDA synchronization events recorded by CUPTI (the CPU waiting for the GPU).
--
-- start: wait start on the CPU, ns.
-- end: wait end, ns.
-- duration: end - start, ns.
-- device_id: CUDA device id.
-- stream_id: CUDA stream id, where the sync is on a stream.
-- correlation_id: links the event to its API call.
-- pid: operating-system process id.
-- api_name: the API call that synchronized, e.g. cudaStreamSynchronize (NULL if unmatched).
-- sync_type: stream, context, event or stream_wait_event, named from the API call (the
--   numeric type in exports changed meaning between nsys versions).
CREATE VIEW syncs AS
SELECT s.start, s."end", s."end" - s.start AS duration, s.device_id, s.stream_id,
       s.correlation_id, s.pid, a.name AS api_name,
       CASE
           WHEN a.name IN ('cudaStreamSynchronize', 'cuStreamSynchronize') THEN 'stream'
           WHEN a.name IN ('cudaDeviceSynchronize', 'cudaThreadSynchronize', 'cuCtxSynchronize') THEN 'context'
           WHEN a.name IN ('cudaEventSynchronize', 'cuEventSynchronize', 'cudaEventQuery', 'cuEventQuery') THEN 'event'
           WHEN a.name IN ('cudaStreamWaitEvent', 'cuStreamWaitEvent') THEN 'stream_wait_event'
           WHEN a.name IS NOT NULL THEN 'other'
       END AS sync_type
FROM base_syncs s
LEFT JOIN api_calls a ON a.correlation_id = s.correlation_id AND a.pid = s.pid;
