-- kernel_owner(name): who owns a kernel's code, from its name: a library whose kernels the user
-- does not rebuild (cuBLAS, cuDNN, FlashAttention, FlashInfer, CUTLASS, NCCL), the kernels
-- torch.compile generates (Triton), PyTorch's own (at::native), or NULL: the user's own code,
-- where source-level advice (registers, launch bounds) applies. cuBLAS's kernels are named for
-- their architecture (ampere_sgemm_*, sm90_xmma_gemm_*, nvjet_*), so that a user's own
-- "sgemm" kernel stays the user's.
CREATE MACRO kernel_owner(name) AS CASE
    WHEN regexp_matches(name, '(?i)^nccl|ncclDevKernel|ncclKernel') THEN 'NCCL'
    WHEN regexp_matches(name, '(?i)^flash_?(fwd|bwd)|^flash::|flash_attn|^fmha') THEN 'FlashAttention'
    WHEN regexp_matches(name, '(?i)flashinfer|^Batch(Decode|Prefill)|^Single(Decode|Prefill)') THEN 'FlashInfer'
    WHEN regexp_matches(name, '(?i)^cudnn|^implicit_convolve') THEN 'cuDNN'
    WHEN regexp_matches(name, '(?i)^nvjet_|^sm[0-9]+_xmma_|^(ampere|volta|turing|maxwell|hopper)_|cublas|^gemv2[NT]_kernel|^gemvx|^splitKreduce')
        THEN 'cuBLAS'
    WHEN regexp_matches(name, '(?i)^cutlass') THEN 'CUTLASS'
    WHEN regexp_matches(name, '^triton_(poi|red|per|tem)_') THEN 'Triton (torch.compile)'
    WHEN regexp_matches(name, '^(vectorized_|unrolled_|index_)?elementwise_kernel|^reduce_kernel|^CatArrayBatchedCopy|^softmax_warp_|^cunn_')
        THEN 'PyTorch'
END;
