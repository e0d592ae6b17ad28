-- diagnostics: the profiler's own messages about the capture (nsys DIAGNOSTIC_EVENT; none in
-- nvprof files and nsys 2022.4 exports).
--
-- time: when it was recorded, ns (NULL if unknown).
-- severity: info, warning, error, verbose or unknown.
-- text: the message.
-- lost: the message says that events were lost or may be missing (e.g. "CUPTI buffers: 49 of
--   50. Some CUPTI events might be missing"): the trace may be incomplete. nsys 2025.3's
--   "Not all CUDA events might have been collected" is not counted: it appears in complete
--   captures too (every sample in samples/ has it).
CREATE VIEW diagnostics AS
SELECT time, severity, text,
       regexp_matches(text, 'might be missing|dropped|were lost|events? lost|overflow', 'i') AS lost
FROM base_diagnostics;
