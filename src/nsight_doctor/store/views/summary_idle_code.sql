-- summary_idle_code: the code that held the CPU while each GPU sat idle in its steady state
-- (idle_code): the five rows with the most time per GPU, part and source, Python frames first,
-- then native symbols, then NVTX ranges, then OS runtime calls.
--
-- device_id: CUDA device id.
-- part: cpu (code between operations), readback (code after a read-back of 32 KiB or more:
--   host-sampling's gaps) or setup (compiling kernels).
-- source: python, native, nvtx or osrt.
-- name: the function, symbol, NVTX range or OS call.
-- location: file:line, library, or one range's full name.
-- caller: for a Python frame in a library, the innermost frame in the program's own files.
-- entry: for a Python frame in a library, the library call the caller made (idle_code.entry).
-- samples: samples taken there (NULL for nvtx and osrt).
-- ns: the cpu time attributed to it, ns.
-- share_pct: ns as % of the GPU's steady time in that part.
CREATE VIEW summary_idle_code AS
SELECT device_id, part, source, name, location, caller, entry, samples, ns, share_pct FROM (
    SELECT *, row_number() OVER (PARTITION BY device_id, part, source ORDER BY ns DESC, name, location) AS r FROM idle_code
) WHERE r <= 5
ORDER BY device_id, part, CASE source WHEN 'python' THEN 0 WHEN 'native' THEN 1 WHEN 'nvtx' THEN 2 ELSE 3 END, ns DESC, name, location;
