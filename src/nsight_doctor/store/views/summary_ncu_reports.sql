-- summary_ncu_reports: the Nsight Compute reports analysed.
--
-- path: the report's path.
-- ncu_version: the ncu that wrote it.
-- kernels: profiled kernels in it.
CREATE VIEW summary_ncu_reports AS
SELECT path, ncu_version, actions AS kernels FROM base_ncu_reports ORDER BY report_id;
