-- Helpers shared by the views (not documented as views).

-- The family of a kernel, from its name (the patterns of vLLM's nsys_profile_tools and the
-- kernels that dominate LLM serving).
CREATE MACRO kernel_family(n) AS
    CASE
        WHEN regexp_matches(lower(n), 'nccl|all_?reduce|allgather|all_gather|reduce_?scatter|cross_device_reduce|all_to_all|alltoall') THEN 'communication'
        WHEN regexp_matches(lower(n), 'flash|fmha|sdpa|attention|attn|paged_attention|flashinfer|mha_|xformers|decode_attention') THEN 'attention'
        WHEN regexp_matches(lower(n), 'gemm|gemv|nvjet|cutlass|xmma|cublas|matmul|wgmma|_mma|splitkreduce|fused_moe|dot_') THEN 'gemm'
        WHEN regexp_matches(lower(n), 'norm') THEN 'norm'
        WHEN regexp_matches(lower(n), 'softmax|reduce|argmax|topk|sort|sum_kernel') THEN 'reduction'
        WHEN regexp_matches(lower(n), 'rotary|rope') THEN 'rotary'
        WHEN regexp_matches(lower(n), 'gather|index|embedding|scatter|cache') THEN 'indexing'
        WHEN regexp_matches(lower(n), 'elementwise|copy|fill|cast|act_and_mul|silu|gelu') THEN 'elementwise'
        ELSE 'other'
    END;
