-- framework: the serving framework or library that produced the profile, from what the
-- capture recorded, strongest signal first: the command line (nsys 2024.x and newer record it)
-- and the NVTX step ranges of an engine (3); Python samples in an engine's code (vllm/,
-- sglang/, tensorrt_llm/ installed or an engine's own subpackages such as sglang/srt/, 3) or
-- in transformers' generation loop (transformers/generation/, 2: the engines import
-- transformers, but do not run its generate()); kernel namespaces such as vllm:: or sgl_kernel
-- (2), and nvFuser's generated kernels (CudaCodeGen::, 1); environment variable names such as
-- VLLM_* or HF_* (1), unless the kernels say otherwise; PyTorch's own kernels (0). Such
-- variables are often set machine-wide: they count only beside a language model's kernels
-- (attention, an embedding lookup or rotary embeddings, by name) or CUDA graph replays (whose
-- kernels the capture hides), so that a kernel sweep or a CNN run under them (convolutions,
-- torch.cat) is not taken for an LLM server. One row; name is unknown when nothing points
-- anywhere. A table, made once when the store is built (advice and the summary read it).
--
-- name: vllm, sglang, tensorrt-llm, transformers, nvfuser, pytorch or unknown.
-- version: the framework's version where the capture records it, else NULL.
-- evidence: the signals that point to it, strongest first.
-- command: the captured command line, when recorded.
CREATE TABLE framework AS
WITH cmd AS (
    SELECT command FROM recorded_processes ORDER BY process LIMIT 1
), lm AS (
    SELECT 1 FROM kernel_classes_t WHERE category IN ('attention', 'attention-unfused', 'embedding', 'rotary')
    UNION ALL (SELECT 1 FROM base_graph_launches LIMIT 1)
), env AS (
    -- (only beside a language model's kernels)
    SELECT name AS var FROM recorded_env WHERE EXISTS (FROM lm)
), nv AS (
    SELECT DISTINCT coalesce(n.text, s.value) AS text
    FROM base_nvtx n LEFT JOIN base_strings s ON s.id = n.text_id
), kn AS (
    SELECT DISTINCT s.value AS name, d.value AS demangled
    FROM kernel_classes_t k
    LEFT JOIN base_strings s ON s.id = k.short_name_id LEFT JOIN base_strings d ON d.id = k.demangled_name_id
), files AS (
    -- (the sampled Python files: few distinct ones among millions of frames)
    SELECT s.value AS path FROM (SELECT DISTINCT file_id FROM base_python_frames) f JOIN base_strings s ON s.id = f.file_id
), py AS (
    SELECT DISTINCT coalesce(
        nullif(regexp_extract(path, '[/\\](?:site|dist)-packages[/\\](vllm|sglang|tensorrt_llm)[/\\]', 1), ''),
        nullif(regexp_extract(path, '[/\\](vllm|sglang|tensorrt_llm)[/\\](?:v1|engine|entrypoints|model_executor|worker|srt|_torch|executor)[/\\]', 1), ''),
        CASE WHEN regexp_matches(path, '[/\\]transformers[/\\]generation[/\\]') THEN 'transformers'
             WHEN regexp_matches(path, '[/\\]transformers[/\\]trainer\.py$') THEN 'transformers-trainer' END) AS pkg
    FROM files
), signals(name, strength, evidence) AS (
    SELECT 'vllm', 3, 'command line: vllm' FROM cmd WHERE regexp_matches(lower(command), '(^|[ /])vllm([ ./]|$)|vllm\.entrypoints|-m vllm')
    UNION ALL SELECT 'sglang', 3, 'command line: sglang' FROM cmd WHERE regexp_matches(lower(command), 'sglang')
    UNION ALL SELECT 'tensorrt-llm', 3, 'command line: trtllm' FROM cmd WHERE regexp_matches(lower(command), 'trtllm|tensorrt_llm|tensorrt-llm')
    UNION ALL SELECT 'transformers', 3, 'command line: transformers' FROM cmd WHERE regexp_matches(lower(command), 'transformers')
    UNION ALL SELECT CASE WHEN starts_with(pkg, 'transformers') THEN 'transformers' ELSE replace(pkg, '_', '-') END,
        CASE WHEN starts_with(pkg, 'transformers') THEN 2 ELSE 3 END,
        'Python samples: ' || CASE pkg WHEN 'transformers' THEN 'transformers generate()'
                                       WHEN 'transformers-trainer' THEN 'transformers Trainer' ELSE pkg || ' code' END
        FROM py WHERE pkg IS NOT NULL
    UNION ALL SELECT 'vllm', 3, 'NVTX ranges: execute_context_...' FROM nv WHERE starts_with(text, 'execute_context_') OR starts_with(text, 'gpu_model_runner: ') HAVING count(*) > 0
    UNION ALL SELECT 'sglang', 3, 'NVTX ranges: scheduler.*' FROM nv WHERE starts_with(text, 'scheduler.run_batch') HAVING count(*) > 0
    UNION ALL SELECT 'tensorrt-llm', 3, 'NVTX ranges: [Executor] _forward_step' FROM nv WHERE starts_with(text, '[Executor] _forward_step') HAVING count(*) > 0
    UNION ALL SELECT 'vllm', 2, 'kernels: vllm::' FROM kn WHERE contains(demangled, 'vllm::') HAVING count(*) > 0
    UNION ALL SELECT 'sglang', 2, 'kernels: sgl_kernel' FROM kn WHERE contains(demangled, 'sgl_kernel') OR contains(demangled, 'sglang') HAVING count(*) > 0
    UNION ALL SELECT 'tensorrt-llm', 2, 'kernels: TensorRT-LLM' FROM kn
        WHERE contains(demangled, 'tensorrt_llm::') OR regexp_matches(name, '^(mmha|fmha_v2|xqa)|masked_multihead_attention') HAVING count(*) > 0
    UNION ALL SELECT 'vllm', 1, 'environment: ' || string_agg(var, ', ' ORDER BY var) FROM env WHERE starts_with(var, 'VLLM_') HAVING count(*) > 0
    UNION ALL SELECT 'sglang', 1, 'environment: ' || string_agg(var, ', ' ORDER BY var) FROM env WHERE starts_with(var, 'SGLANG_') HAVING count(*) > 0
    UNION ALL SELECT 'tensorrt-llm', 1, 'environment: ' || string_agg(var, ', ' ORDER BY var) FROM env
        WHERE starts_with(var, 'TLLM_') OR starts_with(var, 'TRTLLM_') HAVING count(*) > 0
    UNION ALL SELECT 'transformers', 1, 'environment: ' || string_agg(var, ', ' ORDER BY var) FROM env
        WHERE starts_with(var, 'HF_') OR starts_with(var, 'TRANSFORMERS_') HAVING count(*) > 0
    UNION ALL SELECT 'nvfuser', 1, 'kernels: nvFuser (CudaCodeGen::)' FROM kn
        WHERE contains(demangled, 'CudaCodeGen::') OR starts_with(name, 'nvfuser_') HAVING count(*) > 0
    UNION ALL SELECT 'pytorch', 0, 'kernels: PyTorch (at::native)' FROM kn
        WHERE contains(demangled, 'at::native::') OR contains(demangled, 'at_cuda_detail') OR starts_with(name, 'triton_') HAVING count(*) > 0
), ranked AS (
    -- Serving engines run on PyTorch: an engine's signal wins over PyTorch's at equal strength.
    SELECT name, max(strength) AS strength,
           string_agg(evidence, '; ' ORDER BY strength DESC, evidence) AS evidence,
           list_position(['vllm', 'sglang', 'tensorrt-llm', 'transformers', 'nvfuser', 'pytorch'], name) AS pref
    FROM signals GROUP BY name
)
SELECT coalesce((SELECT arg_max(name, (strength, -pref)) FROM ranked), 'unknown') AS name,
       NULL::VARCHAR AS version,
       (SELECT arg_max(evidence, (strength, -pref)) FROM ranked) AS evidence,
       (SELECT command FROM cmd) AS command;
