"""The summary of a profile, typed: one dataclass per documented summary view.

A section class names the view (docs/schema.md) whose rows fill it; its own fields are that
view's columns, in order (tests/test_summary.py checks it), and its other fields are child
sections. ``Summary`` is the contract between the pipeline and the renderers; its JSON form
(``to_json``) is documented in docs/json.md and by the JSON Schema, both generated from these
classes. Renderers import this module and model.py, nothing else of the pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from nsight_doctor.sections.base import PerGpu, Section, child, to_json
from nsight_doctor.sections.ncu import Ncu, NcuGroup, NcuReport, NcuStall
from nsight_doctor.sections.recorded import RecordedOption, RecordedProcess, RecordedSetting

__all__ = [
    "Ncu",
    "NcuGroup",
    "NcuReport",
    "NcuStall",
    "PerGpu",
    "RecordedOption",
    "RecordedProcess",
    "RecordedSetting",
    "Section",
    "child",
    "to_json",
]


@dataclass
class Capture(Section):
    VIEW: ClassVar[str] = "summary_capture"
    capture_ns: int | None
    gpu_start_ns: int | None
    gpu_end_ns: int | None
    gpu_window_ns: int | None
    has_cuda_trace: bool | None
    gpu_busy_pct: float | None
    profiler_overhead_ns: int


@dataclass
class Gpu(Section):
    VIEW: ClassVar[str] = "summary_gpus"
    device_id: int | None
    name: str | None
    sm_count: int | None
    memory_bandwidth_bytes_per_s: int | None
    busy_ns: int
    busy_pct: float | None
    first_op_ns: int | None
    last_op_ns: int | None
    kernel_ns: int
    graph_ns: int
    memcpy_ns: int
    memset_ns: int


@dataclass
class Kernels(Section):
    VIEW: ClassVar[str] = "summary_kernels"
    kernel_count: int
    kernels_in_graphs: int
    kernel_ns: int
    kernel_median_ns: float | None
    kernel_mean_ns: float | None
    tiny_kernel_pct: float | None
    graph_launch_count: int
    graph_ns: int
    tiny_kernel_threshold_ns: int
    launch_rate_per_s: float | None


@dataclass
class TopKernel(Section):
    VIEW: ClassVar[str] = "summary_top_kernels"
    LIMIT: ClassVar[int | None] = 10
    name: str | None
    kind: str
    count: int
    total_ns: int
    share_pct: float | None
    mean_ns: float
    median_ns: float


@dataclass
class MemcpyDirection(Section):
    VIEW: ClassVar[str] = "summary_memcpy_directions"
    direction: str
    host_kind: str
    count: int
    bytes: int
    total_ns: int
    bandwidth_gbs: float | None


@dataclass
class Memcpy(Section):
    VIEW: ClassVar[str] = "summary_memcpy"
    count: int
    bytes: int
    total_ns: int
    by_direction: list[MemcpyDirection] = child("copies by direction and host memory kind (summary_memcpy_directions)")


@dataclass
class Memset(Section):
    VIEW: ClassVar[str] = "summary_memset"
    count: int
    bytes: int
    total_ns: int


@dataclass
class BlockingApi(Section):
    VIEW: ClassVar[str] = "summary_blocking_by_api"
    name: str | None
    count: int
    total_ns: int


@dataclass
class Sync(Section):
    VIEW: ClassVar[str] = "summary_sync"
    count: int
    total_ns: int
    blocking_count: int
    blocking_ns: int
    steady_blocking_count: int
    by_api: list[BlockingApi] = child("every blocking call by API (summary_blocking_by_api)")


@dataclass
class Launch(Section):
    VIEW: ClassVar[str] = "summary_launch"
    api_count: int
    api_ns: int
    api_mean_ns: float | None
    latency_median_ns: float | None
    latency_p90_ns: float | None


@dataclass
class IdleCause(Section):
    VIEW: ClassVar[str] = "summary_idle_causes"
    cause: str
    count: int
    total_ns: int


@dataclass
class IdleBucket(Section):
    VIEW: ClassVar[str] = "summary_idle_histogram"
    bucket: str
    count: int
    total_ns: int


@dataclass
class GapCall(Section):
    VIEW: ClassVar[str] = "gap_api_calls"
    LIMIT: ClassVar[int | None] = 5
    name: str | None
    count: int
    overlap_ns: int


@dataclass
class Gap(Section):
    VIEW: ClassVar[str] = "summary_largest_gaps"
    device_id: int
    start: int
    end: int
    duration: int
    cause: str
    pid: int | None
    next_op: str | None
    launch_name: str | None
    blocking_name: str | None
    api_calls: list[GapCall] = child("the CUDA calls the CPU was in during the gap (gap_api_calls), top 5")


@dataclass
class Idle(Section):
    VIEW: ClassVar[str] = "summary_idle"
    gap_count: int
    idle_ns: int
    gpus: int
    by_cause: list[IdleCause] = child("gaps by cause (summary_idle_causes)")
    histogram: list[IdleBucket] = child("gaps by length (summary_idle_histogram)")
    largest: list[Gap] = child("the largest gaps, as many as --gaps asks (summary_largest_gaps)")


@dataclass
class Nvtx(Section):
    VIEW: ClassVar[str] = "summary_nvtx"
    LIMIT: ClassVar[int | None] = 20
    text: str | None
    domain: str | None
    count: int
    processes: int
    cpu_ns: int | None
    cpu_ns_per_process: float | None
    gpu_ns: int | None
    gpu_ops: int | None
    median_gpu_span_ns: float | None


@dataclass
class MetricAverage(Section):
    """One sampled metric of one GPU; the view's device_id and key place it in the summary."""

    VIEW: ClassVar[str] = "summary_gpu_metrics"
    metric: str
    avg: float | None
    avg_busy: float | None
    samples: int

    @classmethod
    def columns(cls) -> list[str]:
        return ["device_id", "key", *super().columns()]


@dataclass
class Communication(Section):
    VIEW: ClassVar[str] = "summary_communication"
    device_id: int
    pid: int | None
    collectives: int
    ranks: int
    comm_ns: int
    comm_pct: float | None
    transfer_ns: int
    wait_ns: int
    exposed_ns: int
    last_arrivals: int


@dataclass
class PhaseKernel(Section):
    """A top kernel of a phase; the view's device_id and phase place it."""

    VIEW: ClassVar[str] = "summary_phase_kernels"
    LIMIT: ClassVar[int | None] = 5
    name: str | None
    count: int
    total_ns: int
    share_pct: float | None

    @classmethod
    def columns(cls) -> list[str]:
        return ["device_id", "phase", *super().columns()]


@dataclass
class Phase(Section):
    VIEW: ClassVar[str] = "summary_phases"
    device_id: int
    phase: int
    name: str
    start_ns: int
    end_ns: int
    duration_ns: int
    source: str
    busy_pct: float | None
    kernel_ns: int
    steps: int | None
    step_ns_median: float | None
    step_ns_p90: float | None
    steady: bool
    top_kernels: list[PhaseKernel] = child("the phase's top 5 kernels by time (summary_phase_kernels)", [])


@dataclass
class SteadyState(Section):
    VIEW: ClassVar[str] = "summary_steady_state"
    start_ns: int
    end_ns: int
    window_ns: int
    busy_pct: float | None
    kind: str
    step_device_id: int
    steps: int | None
    step_ns_median: float | None
    step_ns_p90: float | None
    share_pct: float | None
    gpus: int


@dataclass
class SteadyIdle(PerGpu):
    """A GPU's steady-state idle time of one cause."""

    VIEW: ClassVar[str] = "summary_steady_idle"
    cause: str
    count: int
    total_ns: int


@dataclass
class SteadyCategory(PerGpu):
    """A GPU's steady-state kernel time of one category."""

    VIEW: ClassVar[str] = "summary_steady_categories"
    category: str | None
    count: int
    total_ns: int


@dataclass
class StepKind(PerGpu):
    """A GPU's steady steps of one kind."""

    VIEW: ClassVar[str] = "summary_step_kinds"
    kind: str
    steps: int
    step_ns_median: float | None
    step_ns_p90: float | None
    busy_ns: int | None


@dataclass
class StepSource(PerGpu):
    """What a GPU's steps were found from."""

    VIEW: ClassVar[str] = "summary_step_sources"
    source: str
    marker: str | None
    occurrences: int
    confidence: str | None
    evidence: str | None
    agreement: str | None
    processes: str | None
    round_passes: float | None


@dataclass
class StepParts(PerGpu):
    """Where a GPU's mean steady step goes; the parts add up to step_ns_mean."""

    VIEW: ClassVar[str] = "summary_step_parts"
    steps: int
    step_ns_mean: float
    gpu_ns: float
    blocked_ns: float
    launch_ns: float
    queued_ns: float
    sync_ns: float
    cpu_ns: float
    api_ns: float
    setup_ns: float


@dataclass
class IdleCode(PerGpu):
    """Code that held the CPU while the GPU sat idle."""

    VIEW: ClassVar[str] = "summary_idle_code"
    part: str
    source: str
    name: str | None
    location: str | None
    caller: str | None
    entry: str | None
    samples: int | None
    ns: float
    share_pct: float | None


@dataclass
class StepRow(Section):
    VIEW: ClassVar[str] = "summary_steps"
    device_id: int
    step: int
    phase: str
    start: int
    duration: int
    ops: int
    gpu_ns: int
    blocked_ns: int
    launch_ns: int
    queued_ns: int
    sync_ns: int
    cpu_ns: int
    api_ns: int
    setup_ns: int


@dataclass
class SteadyGpu(Section):
    VIEW: ClassVar[str] = "summary_steady_gpus"
    device_id: int
    window_ns: int
    busy_ns: int
    idle_ns: int
    busy_pct: float | None
    kind: str
    steps: int | None
    step_ns_median: float | None
    step_ns_p90: float | None
    kernels: int
    kernel_ns: int
    graphs: int
    graph_ns: int
    memcpy_count: int
    memcpy_bytes: int
    memcpy_ns: int
    memset_ns: int
    comm_wait_ns: int
    comm_exposed_wait_ns: float | None
    blocking_calls: int
    blocking_ns: int
    step_kinds: list[StepKind] = child("its steps by the kind of their phase (summary_step_kinds)", [])
    idle: list[SteadyIdle] = child("its idle time by gap cause (summary_steady_idle)", [])
    kernel_categories: list[SteadyCategory] = child("its kernel time by category (summary_steady_categories)", [])
    step_source: StepSource | None = child("what its steps were found from (summary_step_sources)", None)
    step_parts: StepParts | None = child("where its mean steady step goes (summary_step_parts)", None)
    idle_code: list[IdleCode] = child("the code that held the CPU while it sat idle (summary_idle_code)", [])


@dataclass
class SteadyKernel(Section):
    VIEW: ClassVar[str] = "summary_steady_kernels"
    LIMIT: ClassVar[int | None] = 40
    name: str | None
    demangled_name: str | None
    kind: str
    grid: str | None
    block: str | None
    category: str | None
    count: int
    total_ns: int
    share_pct: float | None
    mean_ns: float
    median_ns: float
    scope: str


@dataclass
class KernelCategory(Section):
    VIEW: ClassVar[str] = "summary_kernel_categories"
    category: str | None
    count: int
    total_ns: int
    share_pct: float | None
    scope: str


@dataclass
class Framework(Section):
    VIEW: ClassVar[str] = "summary_framework"
    name: str
    version: str | None
    evidence: str | None


@dataclass
class Summary:
    """Everything the renderers show before the findings."""

    capture: Capture = child("the capture as a whole (summary_capture)", flatten=True)
    framework: Framework = child("the serving framework or library that produced the profile (summary_framework)")
    phases: list[Phase] = child("each GPU's phases in time order (summary_phases)")
    kernel_categories: list[KernelCategory] = child(
        "kernel time by category, over the steady state where there is one (summary_kernel_categories)"
    )
    gpus: list[Gpu] = child("one object per GPU (summary_gpus)")
    kernels: Kernels = child("kernel statistics (summary_kernels)", flatten=True)
    top_kernels: list[TopKernel] = child("the top 10 kernels and graphs by total time (summary_top_kernels)")
    memcpy: Memcpy = child("memory copies (summary_memcpy)")
    memset: Memset = child("memsets (summary_memset)")
    sync: Sync = child("synchronize calls (summary_sync)")
    launch: Launch = child("launch calls (summary_launch)")
    idle: Idle = child("idle gaps (summary_idle)")
    nvtx: list[Nvtx] = child("GPU time per NVTX range, top 20 (summary_nvtx)")
    steady_state: SteadyState | None = child(
        "the steady state the findings are measured on (summary_steady_state), left out when there is none", None
    )
    gpu_metrics: dict[str, dict[str, MetricAverage]] | None = child(
        "only when sampled: per device id, per key (sm_active, sm_issue, tensor_active, dram_read, "
        "dram_write), the metric's averages (summary_gpu_metrics)",
        None,
    )
    communication: list[Communication] | None = child(
        "only when collective kernels ran: per GPU (summary_communication)", None
    )
    ncu: Ncu | None = child("only with an Nsight Compute report (summary_ncu)", None)
    steady_gpus: list[SteadyGpu] = child(
        "each GPU's steady state: its work, idle time, steps and where they go (summary_steady_gpus)", []
    )
    steady_kernels: list[SteadyKernel] = child(
        "the top 40 kernels and CUDA graphs of the steady state by name, template arguments and launch shape "
        "(summary_steady_kernels)",
        [],
    )
    steps: list[StepRow] = child(
        "every steady step of every GPU, its time split by what bounded it (summary_steps)", []
    )
    recorded: list[RecordedProcess] = child(
        "the processes the capture launched: command line, folder, secrets hidden (recorded_processes)", []
    )
    options: list[RecordedOption] = child(
        "the long options on their command lines, with their values, in order (recorded_options)", []
    )
    settings: list[RecordedSetting] = child(
        "their environment variables that distort the capture or set a knob of the run (recorded_settings)", []
    )

    def impact_window(self) -> tuple[int | None, str]:
        """The time a finding's impact is a share of where its rule gives none, and its name:
        the steady state, else the GPU activity window, else the kernel time the Nsight Compute
        reports profiled."""
        if self.steady_state is not None:
            return self.steady_state.window_ns, "the steady state"
        if self.capture.gpu_window_ns:
            return self.capture.gpu_window_ns, "the activity window"
        if self.ncu is not None and self.ncu.profiled_ns:
            return round(self.ncu.profiled_ns), "the profiled kernels' time"
        return None, "the steady state"

    def to_json(self) -> dict[str, Any]:
        return to_json(self)
