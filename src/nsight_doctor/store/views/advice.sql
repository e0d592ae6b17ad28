-- advice: what to do about each problem, in the terms of the framework that produced the
-- profile (store/advice.yaml; docs/advice.md lists it all). The framework's own text applies
-- when the profile looks like a model loop (its steady state has steps); otherwise, and for an
-- unknown framework, the generic text. transformers' text speaks of generate() and serving: where
-- no step is an LLM pass (no prefill, decode or mixed phase: a Trainer's training loop, an
-- encoder), PyTorch's applies. The topics on how to capture (capture-*) follow the
-- profiler that made the inputs instead: nsys, nvprof or ncu. A table, made once when the
-- store is built: most rules read it, some several times, and the framework behind it costs
-- a scan of the kernel names.
--
-- topic: cuda-graphs, compiled-graphs, around-graphs, fewer-kernels, host-sync, host-sampling, moe, recompile,
--   recompile-prompts, readback-code, host-waits, host-overhead, batch-more, fewer-flops, attention-backend, static-kv-cache, pinned-memory,
--   startup, weight-upload, collectives, capture-longer, capture-trace-less,
--   capture-no-gpu-work, step-ranges, library-attention, library-gemm, library-nccl,
--   library-compiled or library-pytorch (store/advice.yaml).
-- framework: the framework (or, for capture-*, the profiler) whose text this is (generic when
--   none applies).
-- text: the advice.
CREATE TABLE advice AS
WITH f AS (
    -- (nvFuser runs under PyTorch: its text is PyTorch's)
    SELECT CASE WHEN (SELECT count(*) FROM steps) = 0 THEN 'generic'
                WHEN name = 'nvfuser' THEN 'pytorch'
                WHEN name = 'transformers' AND NOT EXISTS (SELECT 1 FROM phases WHERE name IN ('prefill', 'decode', 'mixed'))
                THEN 'pytorch'
                ELSE name END AS fw
    FROM framework
), t AS (
    -- nvprof when an input came from it, else ncu when every input is a Nsight Compute report,
    -- else nsys (also without inputs recorded).
    SELECT CASE WHEN bool_or(kind = 'nvprof') THEN 'nvprof'
                WHEN count(*) > 0 AND bool_and(kind = 'ncu-rep') THEN 'ncu'
                ELSE 'nsys' END AS tool
    FROM (SELECT info ->> 'kind' AS kind FROM nsight_doctor_inputs)
)
SELECT a.topic, coalesce(s.framework, a.framework) AS framework, coalesce(s.text, a.text) AS text
FROM advice_t a
LEFT JOIN advice_t s ON s.topic = a.topic
     AND s.framework = CASE WHEN a.topic LIKE 'capture-%' THEN (SELECT tool FROM t) ELSE (SELECT fw FROM f) END
WHERE a.framework = 'generic';
