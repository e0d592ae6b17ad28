-- recorded_knobs: the serving knobs that the recorded launch set, by what they control, from
-- its command-line options (recorded_options) and environment (recorded_env), so that advice
-- can quote the user's own setting back ("the command line passes `--max-num-seqs 8`"). The
-- names are vLLM's, SGLang's and TensorRT-LLM's (their engine arguments), and the
-- attn_implementation argument of scripts built on transformers.
--
-- knob: what it controls: max-batch (sequences per step), attention-backend, eager (CUDA graphs
--   off) or kv-cache-dtype.
-- setting: as recorded, e.g. "--max-num-seqs 8" or "VLLM_ATTENTION_BACKEND=XFORMERS".
-- value: its value; NULL for a flag.
CREATE VIEW recorded_knobs AS
WITH m(knob, name) AS (
    VALUES ('max-batch', '--max-num-seqs'), ('max-batch', '--max-running-requests'),
           ('max-batch', '--max-batch-size'), ('max-batch', '--max_batch_size'),
           ('attention-backend', '--attention-backend'), ('attention-backend', 'VLLM_ATTENTION_BACKEND'),
           ('attention-backend', '--attn-implementation'), ('attention-backend', '--attn_implementation'),
           ('eager', '--enforce-eager'), ('eager', '--disable-cuda-graph'), ('eager', '--disable-cuda-graphs'),
           ('kv-cache-dtype', '--kv-cache-dtype')
)
SELECT m.knob, o.option || coalesce(' ' || o.value, '') AS setting, o.value
FROM recorded_options o JOIN m ON m.name = o.option
UNION ALL
SELECT m.knob, e.name || '=' || e.value AS setting, e.value
FROM recorded_env e JOIN m ON m.name = e.name;
