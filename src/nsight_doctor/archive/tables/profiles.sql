-- profiles: one row per distinct profile: the same content found under several names is
-- one profile with several paths. A profile is one timeline or Nsight Compute report; a
-- report and the export beside it are one profile (the export is read, the report's content
-- identifies it), as are the files grouped by --group folder.
--
-- profile_id: sha256 of the profile's content (of the report when there is one; of every
--   file, by name, for a Parquet folder; of the members' ids for a --group folder profile).
-- path: the path that names it: the report, for a report and its export; otherwise the
--   first path at which its content was found.
-- kind: what the profile is: nsys-rep, nsys-sqlite, nsys-parquet, ncu-rep, nvprof, or group.
-- paths: every path at which this content was found, sorted (members of a tar or zip
--   archive as ARCHIVE!MEMBER).
-- analysed_path: the file that was analysed (the export beside a report, when there is one).
-- inputs: the diagnosis' inputs (JSON: path, kind, producer, producer_version, export_path,
--   export_schema_version), as in the JSON output (docs/json.md).
-- tool: the profiler that wrote it: Nsight Systems, Nsight Compute or nvprof.
-- tool_version: its version (for an export without its report, the nsys that exported it).
-- exporter_version: the nsys that wrote the export that was read, when one was read.
-- gpu_names: the distinct GPU names recorded in the profile, sorted.
-- gpu_count: the GPUs the profile records (the capture machine's, or ncu's profiled ones).
-- active_gpus: the GPUs that ran any kernel, copy or memset in the capture.
-- capture_start: when the capture started (UTC), from the profile itself; NULL when it does
--   not record it (Nsight Compute reports).
-- capture_ns: length of the capture, ns.
-- gpu_busy_pct: GPU busy share of the activity window (as summaries.gpu_busy_pct).
-- findings: how many findings the analysis gave.
-- top_rule_id: the rule of the first-ranked finding.
-- top_impact_ns: that finding's estimated recoverable time, ns.
-- size_bytes: size of the profile's files on disk (all of them for a folder).
-- labels: labels given with --label KEY=VALUE (merged over ingests; the latest value wins).
-- notes: the diagnosis' notes about the run (reused exports, missing data).
-- doctor_version: the nsight-doctor version that analysed it.
-- analysis_digest: digest of nsight-doctor's code and the rules that analysed it (ingest
--   --reanalyze redoes profiles whose digest is not the current one).
-- analysis_s: seconds the analysis took in its worker.
-- ingested_at: when its rows were committed (UTC).
CREATE TABLE IF NOT EXISTS profiles (
    profile_id VARCHAR PRIMARY KEY,
    path VARCHAR,
    kind VARCHAR,
    paths VARCHAR[],
    analysed_path VARCHAR,
    inputs JSON,
    tool VARCHAR,
    tool_version VARCHAR,
    exporter_version VARCHAR,
    gpu_names VARCHAR[],
    gpu_count INTEGER,
    active_gpus INTEGER,
    capture_start TIMESTAMP,
    capture_ns BIGINT,
    gpu_busy_pct DOUBLE,
    findings INTEGER,
    top_rule_id VARCHAR,
    top_impact_ns BIGINT,
    size_bytes BIGINT,
    labels MAP(VARCHAR, VARCHAR),
    notes VARCHAR[],
    doctor_version VARCHAR,
    analysis_digest VARCHAR,
    analysis_s DOUBLE,
    ingested_at TIMESTAMP
);
