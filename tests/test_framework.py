"""The framework view's signals on small stores built from base rows (the rule tests' builder):
which recorded paths, environment variables and kernel names name which framework. The real
captures are checked in test_timeline.py (triton_sweep, hf_requests)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from nsight_doctor.rule_tests import build_case_store

GEMM = "nvjet_sm90_tst_256x8_64x6_2x1_v_bz_TNT"
FLASH = (
    "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 64, 4, false, false, cutlass::bfloat16_t>>"
)
CAT = "void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 4, 64, 64>"
CONV = "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_cudnn"


def framework(kernels: list[str], env: Sequence[str] = (), files: Sequence[str] = ()) -> tuple[str, str | None]:
    tables = {
        "kernels": [{"start": 1000 * i, "end": 1000 * i + 500, "name": k} for i, k in enumerate(kernels)],
        "capture_meta": [{"name": "PROCESS_0:ENVIRONMENT_VARIABLE", "value": v} for v in env],
        "python_frames": [{"sample_id": i, "depth": 0, "function": "f", "file": f} for i, f in enumerate(files)],
    }
    con = build_case_store({k: v for k, v in tables.items() if v})
    try:
        name, evidence = con.execute("SELECT name, evidence FROM framework").fetchone() or ("", None)
        return name, evidence
    finally:
        con.close()


@pytest.mark.parametrize(
    ("kernels", "want"),
    [
        ([GEMM, FLASH], "transformers"),  # an attention kernel by name: a language model's
        ([CONV, CAT, GEMM], "pytorch"),  # a CNN: convolutions and torch.cat, no attention
        ([GEMM], "unknown"),  # a GEMM benchmark (no PyTorch kernel either)
    ],
)
def test_an_environment_variable_counts_only_beside_a_language_models_kernels(kernels, want):
    name, evidence = framework(kernels, env=["HF_HOME=/models"])
    assert name == want
    assert ((evidence or "").startswith("environment")) == (want == "transformers")


@pytest.mark.parametrize(
    ("path", "want"),
    [
        ("/opt/venv/lib/python3.12/site-packages/vllm/v1/engine/core.py", "vllm"),
        ("/usr/lib/python3/dist-packages/sglang/srt/managers/scheduler.py", "sglang"),
        ("/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", "sglang"),  # editable install
        ("/workspace/vllm/vllm/v1/worker/gpu_model_runner.py", "vllm"),
        ("C:\\Python\\Lib\\site-packages\\tensorrt_llm\\_torch\\pyexecutor\\py_executor.py", "tensorrt-llm"),
        ("/opt/venv/lib/python3.12/site-packages/transformers/generation/utils.py", "transformers"),
        # Not a framework's own loop: modelling code (a CLIP text encoder, a Trainer's model),
        # a venv folder named vllm, another package whose name ends in transformers.
        ("/opt/venv/lib/python3.12/site-packages/transformers/models/llama/modeling_llama.py", "pytorch"),
        ("/home/u/vllm/venv/lib/python3.12/site-packages/torch/nn/modules/module.py", "pytorch"),
        ("/opt/venv/lib/python3.12/site-packages/sentence_transformers/generation/x.py", "pytorch"),
    ],
)
def test_python_samples_in_a_frameworks_own_code_name_it(path, want):
    name, evidence = framework([GEMM, "void at::native::vectorized_elementwise_kernel<4>"], files=[path])
    assert name == want
    assert (evidence or "").startswith("Python samples") == (want != "pytorch")


def test_an_engines_python_samples_outrank_transformers_generate():
    """The engines import transformers; a vLLM process's samples may show its code too."""
    vllm = "/opt/venv/lib/python3.12/site-packages/vllm/v1/engine/core.py"
    hf = "/opt/venv/lib/python3.12/site-packages/transformers/generation/utils.py"
    assert framework([GEMM], files=[hf, vllm])[0] == "vllm"
