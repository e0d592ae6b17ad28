-- summary_step_sources: what each GPU's steps were found from (step_sources, the chosen
-- candidate) and how confident the choice is.
--
-- device_id: CUDA device id.
-- source: nvtx, graph or kernel.
-- marker: the NVTX range name, the anchor kernel with its launch dimensions, 'graph launch', or
--   'the longer graphs' launch' (where two models' CUDA graphs take turns).
-- occurrences: how often it recurs.
-- confidence: high, medium or low.
-- evidence: why, in words.
-- agreement: on a GPU of a multi-GPU job, how it agrees with the job's other GPUs, else NULL.
-- processes: on a GPU that two or more processes share, which, and whose work the steps are.
-- round_passes: where a step is a round of two models (speculative decoding), the other model's
--   passes per step, else NULL.
CREATE VIEW summary_step_sources AS
SELECT device_id, source, marker, occurrences, confidence, evidence, agreement, processes, round_passes
FROM step_sources WHERE chosen ORDER BY device_id;
