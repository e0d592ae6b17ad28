#!/usr/bin/env bash
# Captures every sample in samples/ on the lent GPU machine (see ../shared/CAPTURE.md).
#
#   bash samples/capture.sh OUTDIR DEBDIR [all|tp|hf|llm]
#
# OUTDIR receives log.txt and the captures packed as samples.tar.xz.NN (15 MiB pieces).
# DEBDIR holds Debian's libdw1 and libelf1 packages, which the bundled nsys importer needs.
# With two GPUs, the tensor-parallel captures run first and the nsys and ncu captures
# of the single-GPU decode loop then run side by side, one GPU each.
set -u
OUT=${1:?OUTDIR}
DEBDIR=${2:?DEBDIR}
MODE=${3:-all}  # tp: only the tensor-parallel captures (on a 2-GPU machine); hf: only hf_generate;
                # llm: the HF serving captures of workloads/hf_serving.py (one GPU);
                # llm2: its MoE and sampling captures (one GPU);
                # timeline: the captures of workloads/timeline.py, with CPU and Python samples
                # where they name the code (one GPU); ncu_prefill: Nsight Compute of
                # prefill attention on both SDPA backends (one GPU); probes: the timeline
                # model's probes (workloads/probe.py, hf_serving.py cb at other sizes; one GPU);
                # probes2: three more probes of workloads/probe.py (one GPU); probes2_compiled: the
                # first of them alone; probes3: three blind probes (beam search, n-gram
                # blocking with CPU and Python samples, Inductor without CUDA graphs; one GPU);
                # probes4: assisted generation and a lightly loaded server (one GPU); probes5:
                # assisted generation with transformers' drafting defaults (one GPU); probes6: a
                # training loop bound by its DataLoader, with CPU and Python samples (one GPU);
                # probes7: the same under HF Trainer (one GPU); probes8: three blind probes of
                # workloads/probe2.py (latent diffusion, gradient accumulation, CPU-offloaded layers;
                # one GPU); probes9: generate() under emit_nvtx (blind), and the offloaded layers
                # again with CPU and Python samples (one GPU); probes10: two processes on one GPU;
                # probes11: a diffusion transformer and a ViT classifier (blind; one GPU);
                # probes12: the allocator's cache emptied every pass, and a pipelined loop (blind);
                # probes13: piecewise CUDA graphs, and generate() streaming from a worker thread;
                # probes14: speculative decoding in CUDA graphs, and the caching allocator off;
                # probes15: a gpt-fast style graph loop, a heat solver, an embedding server, a pass
                # in two CUDA graphs, speculative decoding with one draft pass; probes16: a decode
                # loop with asynchronous scheduling, CUDA graphs per batch-size bucket, a
                # retrieval-augmented request loop (blind; one GPU); probes17: a wait by polling
                # an event (spinning, or asleep between polls), NVTX ranges per decoder layer
                # only, overlapping NVTX ranges per request (blind; one GPU); probes18: generate()
                # with its KV cache offloaded to the host, and with flex attention (blind; one GPU);
                # probes19: a long prompt prefilled in chunks, prompt lookup decoding (blind)
W=samples/workloads
C=/tmp/cap
mkdir -p "$C" /tmp/dw
exec > >(tee -a "$OUT/log.txt") 2>&1
export PYTHONUNBUFFERED=1

for f in "$DEBDIR"/libdw1*.deb "$DEBDIR"/libelf1*.deb; do dpkg -x "$f" /tmp/dw; done
export LD_LIBRARY_PATH=/tmp/dw/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
NSYS=$(ls -d /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys | tail -1)
NGPU=$(nvidia-smi -L | wc -l)

echo "== versions"
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
nvidia-smi topo -m || true
$NSYS --version
ncu --version | tail -1
python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'
date -u

NSYS_COMMON=(-f true --sample=none --cpuctxsw=none)
# The profiled region is bracketed by cudaProfilerStart/Stop; NSYS_RANGE=() profiles the whole process.
NSYS_RANGE=(--capture-range=cudaProfilerApi --capture-range-end=stop)
NSYS_TIMEOUT=${NSYS_TIMEOUT:-120}

nsys_capture() {  # name gpu extra-nsys-args... -- workload args...
  local name=$1 gpu=$2; shift 2
  local nargs=() ; while [ "$1" != "--" ]; do nargs+=("$1"); shift; done; shift
  echo "== nsys $name (GPU $gpu)"
  CUDA_VISIBLE_DEVICES=$gpu timeout $NSYS_TIMEOUT $NSYS profile -o "$C/$name" "${NSYS_COMMON[@]}" \
    "${NSYS_RANGE[@]}" "${nargs[@]}" python3 $W/"$@"
  timeout 90 $NSYS export --type sqlite -f true -o "$C/$name.sqlite" "$C/$name.nsys-rep"
  ls -la "$C/$name".*
}

ncu_capture() {  # name gpu ncu-args... -- workload args...
  local name=$1 gpu=$2; shift 2
  local nargs=() ; while [ "$1" != "--" ]; do nargs+=("$1"); shift; done; shift
  echo "== ncu $name (GPU $gpu)"
  CUDA_VISIBLE_DEVICES=$gpu timeout 150 ncu --clock-control none --profile-from-start off --nvtx \
    -f -o "$C/$name" "${nargs[@]}" python3 $W/"$@"
  ls -la "$C/$name".*
}

# Captures start only before this many seconds have passed, so the pack step always runs
# inside the device tool's 10-minute limit.
DEADLINE=${DEADLINE:-400}
in_time() { [ "$SECONDS" -lt "$DEADLINE" ] || { echo "== skip $1: past ${DEADLINE}s"; return 1; }; }

nsys_series() {
  local g=$1 T=(-t cuda,nvtx,osrt,cublas)
  in_time decode_b1 && nsys_capture decode_b1 $g "${T[@]}" -- decode.py --batch 1
  in_time decode_b512 && nsys_capture decode_b512 $g "${T[@]}" -- decode.py --batch 512
  in_time decode_b1_gpumetrics && nsys_capture decode_b1_gpumetrics $g "${T[@]}" --gpu-metrics-devices=$g -- decode.py --batch 1
  in_time decode_b1_graphs && nsys_capture decode_b1_graphs $g "${T[@]}" --cuda-graph-trace=graph -- decode.py --batch 1 --graphs
  echo "== parquet export of decode_b1"
  timeout 90 $NSYS export --type parquetdir -f true -o "$C/decode_b1_parquet" "$C/decode_b1.nsys-rep"
  echo "== NVIDIA's own analysis of decode_b1, for reference"
  (cd $C && timeout 60 $NSYS stats -f csv -o decode_b1_stats \
     -r cuda_gpu_kern_sum,cuda_api_sum,cuda_gpu_mem_time_sum,cuda_gpu_mem_size_sum decode_b1.sqlite)
  (cd $C && timeout 60 $NSYS analyze -f csv -o decode_b1_analyze decode_b1.sqlite)
  in_time decode_b1_graphs_node && nsys_capture decode_b1_graphs_node $g "${T[@]}" --cuda-graph-trace=node -- decode.py --batch 1 --graphs
}

ncu_series() {
  local g=$1 A=(decode.py --steps 2 --warmup 3)
  in_time ncu_b1_full && ncu_capture ncu_decode_b1_full $g --set full --launch-count 24 -- "${A[@]}" --batch 1
  in_time ncu_b512_full && ncu_capture ncu_decode_b512_full $g --set full --launch-count 24 -- "${A[@]}" --batch 512
  in_time ncu_b1_basic && ncu_capture ncu_decode_b1_basic $g --set basic --launch-count 24 -- "${A[@]}" --batch 1
  in_time ncu_b1_detailed30 && ncu_capture ncu_decode_b1_detailed30 $g --set detailed --launch-count 30 -- "${A[@]}" --batch 1
}

# Each pack writes NAME.tar.xz.NN pieces to OUT, so a later timeout cannot lose them.
pack() {
  echo "== pack $1"
  if [ "$1" = tp ]; then (cd $C/tp && tar cf - --exclude='*.qdstrm' .) ; else
    (cd $C && tar cf - --exclude='*.qdstrm' --exclude=tp .); fi | xz -T0 -6 | split -b 15M -d - "$OUT/$1.tar.xz."
  ls -la "$OUT"
}

# A tensor-parallel capture must hold both ranks; when the capture range did not catch both
# processes, capture the whole run instead.
tp_capture() {  # variant
  local v=$1 args=(tp_decode.py --world 2 --variant $1 --batch 512 --steps 16 --warmup 3)
  nsys_capture tp2_$v 0,1 -t cuda,nvtx,osrt --trace-fork-before-exec=true -- "${args[@]}"
  local ndev
  ndev=$(python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); print(c.execute('select count(distinct deviceId) from CUPTI_ACTIVITY_KIND_KERNEL').fetchone()[0])" "$C/tp2_$v.sqlite" 2>/dev/null || echo 0)
  echo "== tp2_$v: kernels on $ndev GPUs"
  if [ "$ndev" -lt 2 ]; then
    echo "== tp2_$v: recapturing without the capture range"
    CUDA_VISIBLE_DEVICES=0,1 timeout 150 $NSYS profile -o "$C/tp2_$v" -f true --sample=none --cpuctxsw=none \
      -t cuda,nvtx,osrt --trace-fork-before-exec=true python3 $W/"${args[@]}"
    timeout 90 $NSYS export --type sqlite -f true -o "$C/tp2_$v.sqlite" "$C/tp2_$v.nsys-rep"
  fi
  # How long nsys takes to export each form, for docs/performance.md.
  local t0=$SECONDS
  timeout 90 $NSYS export --type sqlite -f true -o "/tmp/exp_$v.sqlite" "$C/tp2_$v.nsys-rep" >/dev/null 2>&1
  local t1=$SECONDS
  timeout 90 $NSYS export --type parquetdir -f true -o "/tmp/exp_${v}_pq" "$C/tp2_$v.nsys-rep" >/dev/null 2>&1
  echo "== export timing tp2_$v: sqlite $((t1 - t0)) s, parquetdir $((SECONDS - t1)) s"
}

# The HF serving captures (workloads/hf_serving.py): each is exported, summarised by
# nsys_facts.py (into the log) and packed on its own as llm_NAME.tar.xz.NN.
llm_capture() {  # name extra-nsys-args... -- hf_serving.py args...
  local name=$1; shift
  in_time "$name" || return 1
  local t=$SECONDS
  nsys_capture "$name" 0 "$@" --json "$C/$name.json"
  echo "== $name: capture and export took $((SECONDS - t)) s"
  echo "== facts $name"
  timeout 60 python3 samples/nsys_facts.py "$C/$name.sqlite" --json "$C/$name.json" || true
  mkdir -p "$C/llm/$name"
  mv "$C/$name".* "$C/llm/$name/"
  (cd "$C/llm" && tar cf - --exclude='*.qdstrm' "$name") | xz -T0 -6 | split -b 15M -d - "$OUT/llm_$name.tar.xz."
  ls -la "$OUT"
}

llm_series() {
  local T=(-t cuda,nvtx,osrt) S=hf_serving.py
  python3 -c 'import transformers; print("transformers", transformers.__version__)'
  export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
  llm_capture hf_eager_attn "${T[@]}" -- $S generate --attn eager --batch 8 --prompt-len 512 --new-tokens 16
  llm_capture hf_sdpa "${T[@]}" -- $S generate --attn sdpa --batch 8 --prompt-len 512 --new-tokens 16
  # KV cache of 16 x 16 heads x 64 x (128..256) tokens per layer: 4 MB growing to 8 MB.
  llm_capture hf_cat_cache "${T[@]}" -- $S generate --attn sdpa --cache dynamic --batch 16 --kv-heads 16 \
    --prompt-len 128 --new-tokens 128
  llm_capture hf_static_cache "${T[@]}" -- $S generate --attn sdpa --cache static --batch 16 --kv-heads 16 \
    --prompt-len 128 --new-tokens 128
  local R=("${NSYS_RANGE[@]}"); NSYS_RANGE=()  # the whole process
  llm_capture hf_startup "${T[@]}" -- $S startup --batch 8 --seq 1024 --passes 20
  NSYS_RANGE=("${R[@]}")
  NSYS_TIMEOUT=170 llm_capture hf_cb_graphs "${T[@]}" --cuda-graph-trace=node -- $S cb --requests 32 \
    --min-prompt 16 --max-prompt 400 --new-tokens 32 --max-batch-tokens 1024 --max-memory-percent 0.3
  if ! grep -q '"errors": 0' "$C/llm/hf_cb_graphs/hf_cb_graphs.json" 2>/dev/null; then
    echo "== hf_cb_graphs failed: continuous batching without CUDA graphs"
    NSYS_TIMEOUT=150 llm_capture hf_cb_eager "${T[@]}" -- $S cb --requests 32 --min-prompt 16 --max-prompt 400 \
      --new-tokens 32 --max-batch-tokens 1024 --max-memory-percent 0.3 --no-graphs
  fi
}

# Mixture-of-experts routing (eager per-expert loop vs grouped GEMM) and sampling on the host vs
# on the GPU. A short run of each workload first, so that a broken one fails in seconds.
llm2_series() {
  local T=(-t cuda,nvtx,osrt) S=hf_serving.py
  python3 -c 'import transformers; print("transformers", transformers.__version__)'
  export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
  local only=${LLM2_ONLY:-moe sample}
  for args in "moe --experts eager" "moe --experts grouped_mm" "sample --where host" "sample --where gpu"; do
    case " $only " in *" ${args%% *} "*) ;; *) continue;; esac
    echo "== dry run: $args"
    timeout 120 python3 $W/$S $args --new-tokens 2 || echo "== dry run failed: $args"
  done
  if [[ " $only " == *" moe "* ]]; then
    llm_capture hf_moe_eager "${T[@]}" -- $S moe --experts eager --batch 8 --prompt-len 128 --new-tokens 32
    llm_capture hf_moe_grouped "${T[@]}" -- $S moe --experts grouped_mm --batch 8 --prompt-len 128 --new-tokens 32
  fi
  if [[ " $only " == *" sample "* ]]; then
    llm_capture hf_sample_host "${T[@]}" -- $S sample --where host --batch 8 --prompt-len 128 --new-tokens 32
    llm_capture hf_sample_gpu "${T[@]}" -- $S sample --where gpu --batch 8 --prompt-len 128 --new-tokens 32
  fi
}

# The timeline captures (workloads/timeline.py and two more of hf_serving.py): steps that are
# hard to find, CPU time after a sync, a kernel sweep, SDPA's math path. Where the CPU's code is
# what the sample should name, the capture also samples the CPU (IP samples with their call
# stacks, and Python's frames) and is exported with the Python samples' payloads (--include-json).
SAMPLED=(--sample=process-tree --cpuctxsw=process-tree --python-sampling=true --python-sampling-frequency=1000)
tl_capture() {  # name sampled|plain extra-nsys-args... -- workload args...
  local name=$1 mode=$2; shift 2
  in_time "$name" || return 1
  local t=$SECONDS nargs=() common=("${NSYS_COMMON[@]}") export_args=()
  while [ "$1" != "--" ]; do nargs+=("$1"); shift; done; shift
  if [ "$mode" = sampled ]; then common=(-f true "${SAMPLED[@]}"); export_args=(--include-json=true); fi
  echo "== nsys $name ($mode)"
  timeout $NSYS_TIMEOUT $NSYS profile -o "$C/$name" "${common[@]}" "${NSYS_RANGE[@]}" "${nargs[@]}" \
    python3 $W/"$@" --json "$C/$name.json"
  timeout 90 $NSYS export --type sqlite -f true "${export_args[@]}" -o "$C/$name.sqlite" "$C/$name.nsys-rep"
  echo "== $name: capture and export took $((SECONDS - t)) s"
  ls -la "$C/$name".*
  timeout 60 python3 samples/nsys_facts.py "$C/$name.sqlite" --json "$C/$name.json" || true
  mkdir -p "$C/tl/$name"; mv "$C/$name".* "$C/tl/$name/"
}

# Nsight Compute of prefill attention, both SDPA backends: layer 0's projections and
# FlashAttention's kernel (flash), or the math path's FP32 GEMMs and softmax (math). A name
# filter, since skipping a fixed count of launches lands on elementwise kernels.
ncu_prefill_series() {
  local dir=$1
  mkdir -p "$dir"
  export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
  in_time ncu_prefill_flash && (cd "$dir" && CUDA_VISIBLE_DEVICES=0 timeout 200 ncu --clock-control none \
    --profile-from-start off --set full -k regex:'flash_fwd|nvjet' --launch-count 5 \
    -f -o ncu_prefill_flash python3 "$OLDPWD/$W/timeline.py" prefill --backend flash --passes 1 --layers 2)
  in_time ncu_prefill_math && (cd "$dir" && CUDA_VISIBLE_DEVICES=0 timeout 200 ncu --clock-control none \
    --profile-from-start off --set full -k regex:'xmma_gemm|SoftMax' --launch-count 3 \
    -f -o ncu_prefill_math python3 "$OLDPWD/$W/timeline.py" prefill --backend math --passes 1 --layers 2)
  ls -la "$dir"
}

timeline_series() {
  local T=(-t cuda,nvtx,osrt) S=timeline.py
  python3 -c 'import transformers, triton; print("transformers", transformers.__version__, "triton", triton.__version__)'
  export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
  tl_capture stream_python sampled "${T[@]}" -- $S stream --work python
  tl_capture hf_requests sampled "${T[@]}" -- $S requests --requests 3 --new-tokens 48
  tl_capture cb_graph_trace plain "${T[@]}" --cuda-graph-trace=graph -- hf_serving.py cb --requests 24 \
    --min-prompt 16 --max-prompt 600 --new-tokens 48 --max-batch-tokens 1024 --max-memory-percent 0.3
  tl_capture triton_sweep plain "${T[@]}" -- $S sweep
  tl_capture stream_sleep sampled "${T[@]}" -- $S stream --work sleep --cpu-ms 3 --nvtx
  tl_capture prefill_math plain "${T[@]}" -- $S prefill --backend math
  tl_capture prefill_flash plain "${T[@]}" -- $S prefill --backend flash
  tl_capture kv_cat16 plain "${T[@]}" -- hf_serving.py generate --attn sdpa --cache dynamic --batch 32 \
    --kv-heads 16 --prompt-len 256 --new-tokens 16
  ncu_prefill_series "$C/tl"
  echo "== pack timeline"
  (cd $C/tl && tar cf - --exclude='*.qdstrm' .) | xz -T0 -6 | split -b 15M -d - "$OUT/timeline.tar.xz."
  ls -la "$OUT"
}

# Workloads unlike the other samples' (workloads/probe.py, and hf_serving.py's continuous batching at
# other sizes), each capture's log holding the workload's FACTS line: the probes of the timeline
# model in samples/hf_qwen_sample, hf_cb_eager, hf_cb_graphs_varied and cnn_train_nvtx.
probe_capture() {  # name range|whole|sampled|node workload args... (sampled: a range, with CPU and Python
  # samples; node: a range, with graphs' kernels traced one by one)
  local name=$1 range=$2; shift 2
  local R=() S=(--sample=none --cpuctxsw=none) X=()
  [ "$range" != whole ] && R=("${NSYS_RANGE[@]}")
  [ "$range" = node ] && R+=(--cuda-graph-trace=node)
  [ "$range" = sampled ] && S=("${SAMPLED[@]}") && X=(--include-json=true)
  echo "== nsys $name"
  timeout $NSYS_TIMEOUT $NSYS profile -o "$C/$name" -f true -t cuda,nvtx,osrt,cublas,cudnn "${S[@]}" \
    "${R[@]}" python3 "$@" > "$C/$name.log" 2>&1
  grep -a "FACTS" "$C/$name.log" | head -1
  timeout 90 $NSYS export --type sqlite -f true "${X[@]}" -o "$C/$name.sqlite" "$C/$name.nsys-rep" > /dev/null
  xz -T0 -6 -c "$C/$name.sqlite" > "$OUT/$name.sqlite.xz"; cp "$C/$name.log" "$OUT/"
}

probe_series() {
  export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
  probe_capture hf_qwen_sample whole $W/probe.py qwen
  probe_capture hf_nested_nvtx whole $W/probe.py nested
  probe_capture cnn_train_nvtx whole $W/probe.py cnn
  probe_capture hf_cb_eager range $W/hf_serving.py cb --requests 24 --min-prompt 32 --max-prompt 300 \
    --new-tokens 24 --max-batch-tokens 512 --max-memory-percent 0.3 --no-graphs
  probe_capture hf_cb_graphs_varied range $W/hf_serving.py cb --requests 40 --min-prompt 24 --max-prompt 360 \
    --new-tokens 28 --max-batch-tokens 768 --max-memory-percent 0.3
}

# Three more probes (2026-12-05): a compiled forward replayed as CUDA graphs, a GPU-bound generate,
# an encoder-decoder; each in a capture range after its warm-up.
probe2_compiled() {
  export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
  probe_capture hf_compiled range $W/probe.py compiled --batch 4 --new-tokens 32 --calls 2
}

probe2_series() {
  probe2_compiled
  probe_capture hf_bigbatch range $W/probe.py bigbatch --batch 64 --prompt-len 1024 --new-tokens 16 --layers 16
  probe_capture t5_generate range $W/probe.py t5 --batch 8 --prompt-len 128 --new-tokens 32 --layers 6
}

# Three blind probes (2026-12-05, third series): beam search, Inductor's kernels launched one by
# one, and generate()'s n-gram blocking (Python over every token after a read-back each step).
probe3_series() {
  export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
  probe_capture hf_beam range $W/probe.py beam --batch 2 --beams 4 --new-tokens 32
  probe_capture hf_ngram sampled $W/probe.py ngram --batch 4 --prompt-len 512 --new-tokens 32
  probe_capture hf_inductor range $W/probe.py compiled --mode default --batch 4 --new-tokens 32
}

# Two more blind probes (2026-12-05, fourth series): assisted generation (a draft model), and a
# lightly loaded server (batch-1 requests after think times).
probe4_series() {
  export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
  probe_capture hf_assisted range $W/probe.py assisted --batch 1 --new-tokens 48 --draft-tokens 4
  probe_capture hf_server range $W/probe.py server --batch 1 --new-tokens 24 --calls 6 --think-ms 40
}

# Assisted generation with transformers' own drafting settings (2026-12-05, later).
probe5_series() {
  export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
  probe_capture hf_assisted_defaults range $W/probe.py assisted --batch 1 --new-tokens 64 --hf-defaults
}

# A training loop fed by a DataLoader too slow for its GPU, with CPU and Python samples
# (2026-12-05, sixth series).
probe6_series() {
  probe_capture train_loader sampled $W/probe.py loader --batch 64 --iters 40 --workers 2 --item-ms 0.5
}

# The same class under HF Trainer (Accelerate's DataLoader around PyTorch's), 2026-12-05.
probe7_series() {
  export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
  probe_capture hf_trainer_loader sampled $W/probe.py trainer --batch 8 --iters 30 --workers 2 --item-ms 4
}

# Three blind probes of loops unlike the samples' (workloads/probe2.py), 2026-12-05.
probe8_series() {
  export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
  probe_capture sd_diffusion range $W/probe2.py diffusion
  probe_capture train_accum range $W/probe2.py accum
  probe_capture hf_offload range $W/probe2.py offload
}

# A blind probe of operator NVTX ranges, and the offload probe with samples, 2026-12-05.
probe9_series() {
  export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
  probe_capture hf_emit_nvtx range $W/probe2.py emit_nvtx
  probe_capture hf_offload_sampled sampled $W/probe2.py offload
}

# A blind probe of two programs sharing one GPU, 2026-12-05.
probe10_series() {
  export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
  probe_capture hf_shared_gpu whole $W/probe2.py shared
}

# Blind probes of transformers that are not language models (a DiT, a ViT), 2026-12-05.
probe11_series() {
  export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
  probe_capture dit_diffusion range $W/probe3.py dit
  probe_capture vit_classify range $W/probe3.py vit
}

# Blind probes of the allocator's cache emptied every pass, and of a healthy pipelined loop
# (input prefetched on a side stream), 2026-12-05.
probe12_series() {
  export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
  probe_capture hf_empty_cache range $W/probe3.py empty_cache
  probe_capture prefetch_pipeline range $W/probe3.py prefetch
}

# Blind probes of piecewise CUDA graphs (as vLLM's: eager attention between graph replays) and
# of generate() streaming from a worker thread to a main thread that runs Python per token
# (with CPU and Python samples), 2026-12-05.
probe13_series() {
  export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
  NSYS_TIMEOUT=400 probe_capture hf_piecewise_graphs range $W/probe3.py piecewise
  probe_capture hf_streamer_thread sampled $W/probe3.py streamer
}

# Blind probes of speculative decoding with both models in CUDA graphs (traced as graphs, and
# node by node) and of generate() with PyTorch's caching allocator off, 2026-12-05.
probe14_series() {
  export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
  probe_capture spec_graphs range $W/probe4.py specgraph
  probe_capture spec_graphs_node node $W/probe4.py specgraph
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 probe_capture hf_no_alloc_cache range $W/probe4.py nocache
}

probe15_series() {
  export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
  probe_capture graph_prefill_decode range $W/probe4.py prefillgraph
  probe_capture jacobi_solver range $W/probe5.py jacobi
  probe_capture embed_server sampled $W/probe5.py embed
  probe_capture split_graphs range $W/probe4.py splitgraph
  probe_capture spec_graphs_k1 range $W/probe4.py specgraph --draft-tokens 1
}

probe16_series() {
  export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
  probe_capture async_overlap sampled $W/probe6.py overlap
  probe_capture graph_buckets range $W/probe6.py buckets
  probe_capture rag_requests sampled $W/probe6.py rag
}

probe17_series() {
  export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
  probe_capture spin_wait sampled $W/probe7.py spin
  probe_capture poll_sleep sampled $W/probe7.py spin --sleep-us 200
  probe_capture layer_nvtx range $W/probe7.py layers
  probe_capture request_ranges range $W/probe7.py requests
}

probe18_series() {
  export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
  probe_capture hf_kv_offload range $W/probe8.py kvoffload
  probe_capture hf_flex_attn range $W/probe8.py flex
}

probe19_series() {
  export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
  probe_capture hf_chunked_prefill range $W/probe8.py chunked
  probe_capture hf_prompt_lookup range $W/probe8.py lookup
}

if [ "$MODE" = timeline ]; then
  timeline_series
elif [ "$MODE" = probes ]; then
  probe_series
elif [ "$MODE" = probes2 ]; then
  probe2_series
elif [ "$MODE" = probes3 ]; then
  probe3_series
elif [ "$MODE" = probes4 ]; then
  probe4_series
elif [ "$MODE" = probes5 ]; then
  probe5_series
elif [ "$MODE" = probes6 ]; then
  probe6_series
elif [ "$MODE" = probes7 ]; then
  probe7_series
elif [ "$MODE" = probes8 ]; then
  probe8_series
elif [ "$MODE" = probes9 ]; then
  probe9_series
elif [ "$MODE" = probes10 ]; then
  probe10_series
elif [ "$MODE" = probes11 ]; then
  probe11_series
elif [ "$MODE" = probes12 ]; then
  probe12_series
elif [ "$MODE" = probes13 ]; then
  probe13_series
elif [ "$MODE" = probes14 ]; then
  probe14_series
elif [ "$MODE" = probes15 ]; then
  probe15_series
elif [ "$MODE" = probes16 ]; then
  probe16_series
elif [ "$MODE" = probes17 ]; then
  probe17_series
elif [ "$MODE" = probes18 ]; then
  probe18_series
elif [ "$MODE" = probes19 ]; then
  probe19_series
elif [ "$MODE" = probes2_compiled ]; then
  probe2_compiled
elif [ "$MODE" = ncu_prefill ]; then
  ncu_prefill_series "$C/np"
  (cd $C/np && tar cf - ./*.ncu-rep) | xz -T0 -6 | split -b 15M -d - "$OUT/ncu_prefill.tar.xz."
elif [ "$MODE" = llm ]; then
  llm_series
elif [ "$MODE" = llm2 ]; then
  llm2_series
elif [ "$MODE" = hf ]; then
  python3 -c 'import transformers; print("transformers", transformers.__version__)'
  nsys_capture hf_generate 0 -t cuda,nvtx,osrt -- hf_generate.py --batch 4 --new-tokens 32
  pack hf
elif [ "$MODE" = tp ]; then
  for v in exposed overlap straggler; do
    in_time tp2_$v && tp_capture $v
  done
  mkdir -p $C/tp && mv $C/tp2_* $C/tp/
  pack tp
elif [ "$NGPU" -ge 2 ]; then
  nsys_series 0 > "$C/nsys_series.log" 2>&1 &
  ncu_series 1
  wait
  cat "$C/nsys_series.log"
  pack single
  for v in exposed overlap straggler; do
    in_time tp2_$v && tp_capture $v
  done
  mkdir -p $C/tp && mv $C/tp2_* $C/tp/
  pack tp
else
  nsys_series 0
  ncu_series 0
  pack single
fi

date -u
