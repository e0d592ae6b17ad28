-- summary_nvtx: GPU time projected onto NVTX ranges (nvtx_gpu), by text and domain, most GPU
-- time first. PyTorch's operator ranges (`torch.autograd.profiler.emit_nvtx`: "aten::mm, seq =
-- 12, op_id = 3456, sizes = [...]") go by the operator's name: each instance's text is its own
-- (the pattern is timeline/code.py's TORCH_OP_ARGS, for the code named in the idle gaps).
--
-- text: the range's message (an operator range's name alone).
-- domain: NVTX domain (NULL for the default domain).
-- count: ranges.
-- processes: processes that opened them (one per rank in a multi-process capture).
-- cpu_ns: their total length on the CPU, summed over processes, ns.
-- cpu_ns_per_process: cpu_ns / processes, ns.
-- gpu_ns: GPU time of the operations issued inside them, ns.
-- gpu_ops: those operations.
-- median_gpu_span_ns: median, over the ranges, of the span from their first operation's start to their last one's end on the GPU, ns.
CREATE VIEW summary_nvtx AS
SELECT regexp_replace(text, ', (seq|stashed seq|op_id|sizes|input_op_ids) = .*$', '') AS text,
       domain, count(*) AS count, count(DISTINCT pid) AS processes, sum(duration) AS cpu_ns,
       sum(duration) / count(DISTINCT pid) AS cpu_ns_per_process,
       sum(gpu_time) AS gpu_ns, sum(gpu_ops) AS gpu_ops,
       median(gpu_end - gpu_start) AS median_gpu_span_ns
FROM nvtx_gpu GROUP BY 1, domain ORDER BY gpu_ns DESC NULLS LAST, cpu_ns DESC, text;
