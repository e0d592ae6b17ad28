-- summary_framework: the serving framework or library detected (framework), one row.
--
-- name: vllm, sglang, tensorrt-llm, transformers, nvfuser, pytorch or unknown.
-- version: its version where the capture records it, else NULL.
-- evidence: the signals that point to it.
CREATE VIEW summary_framework AS
SELECT name, version, evidence FROM framework;
