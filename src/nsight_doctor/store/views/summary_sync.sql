-- summary_sync: synchronize calls over the whole capture (one row).
--
-- count: calls of the cuda*/cu*Synchronize family.
-- total_ns: time the CPU spent in them, ns.
CREATE VIEW summary_sync AS
SELECT count(*) AS count, coalesce(sum(duration), 0) AS total_ns FROM api_calls WHERE category = 'sync';
