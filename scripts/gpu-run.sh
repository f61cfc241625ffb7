#!/usr/bin/env bash
# Runs on the GPU machine (one H100, 16 cores; no Rust, no FFmpeg, no network), from the root of
# the working tree that travelled there with target/gpu-kit (made here by scripts/gpu-kit.sh).
# One stage per call (a call runs at most 10 minutes); results go under $OUT:
#
#   scripts/gpu-run.sh checks    the GPU checks (`bench gpu-check`, bench/src/gpu_check.rs): a
#                                step on cuda and on wgpu against the CPU's, f32 and half
#                                precision; the input pipeline; checkpoints moved between devices
#   scripts/gpu-run.sh ours      bench sweep on cuda over the pusht-like dataset: PushT classic and
#                                tiny at batch 64 and 256, f32 / bf16 / f16, phases, samples/s,
#                                the loop's data wait, the transforms chain, the loader
#   scripts/gpu-run.sh ours-aloha  the same for the classic policy on the aloha-like dataset
#                                (two 240x320 cameras)
#   scripts/gpu-run.sh lerobot   LeRobot 0.6.1 on the same GPU, same recipe and batches, eager f32
#                                and bf16 autocast (bench/lerobot/train_step_gpu.py)
#   scripts/gpu-run.sh cudnn     the cuDNN path, with bench-untuned and bench-fusion (NO_AUTOTUNE=1
#                                kits have nothing else): where cuDNN was found, the cuda checks
#                                (cuDNN's convolutions against Flex and burn's, the stream
#                                ordering), then the PushT classic step on pusht_images with cuDNN,
#                                most telling first: f32 at batch 64 and 256 (fusion's with the
#                                real loop after it), the same with the U-Net's 1-D convolutions
#                                as cuBLAS's products (LEROBOT_RS_CONV1D=cublas), with cuDNN's
#                                graph API competing in the search (LEROBOT_RS_CUDNN_GRAPH=1),
#                                with the 1-D convolutions as burn's matrix product
#                                (LEROBOT_RS_CONV1D=burn); bf16 at 64 (cuDNN, then cuBLAS for
#                                the 1-D ones); f32 again on the algorithms the first run kept;
#                                bf16 with the graph API; then the launches counted in runs of
#                                their own, two with the gather 64 and 106 parameters a launch
#                                (LEROBOT_RS_PARTS_PER_LAUNCH; 71 by default); with BASELINE=1 without
#                                cuDNN (f32, 64). The steps
#                                share STAGE_SECONDS: those the time does not reach are said to
#                                be skipped.
#                                BUILDS=fusion skips the untuned runs (a list, by spaces or commas),
#                                CHECK_ONLY=cudnn (or graph) runs only those checks
#   scripts/gpu-run.sh best      one call that measures the best first (issue 59), in 560 s: the
#                                cuDNN checks on the build that trains (bench-fusion), then the
#                                PushT classic step in order of expected value: the combination
#                                predicted fastest (cuDNN's graph API beside its legacy search,
#                                the U-Net's 1-D convolutions as cuBLAS's products, the Linear
#                                layers' products in cuBLAS) in f32 and
#                                bf16 at batch 64 and 256, then bf16 with the encoder's maps
#                                channels-last (LEROBOT_RS_CHANNELS_LAST=1), then today's default
#                                (f32), then the real loop at 256 with its data wait. Each step's budget is
#                                printed before the first runs; the legacy algorithms the
#                                searches choose are kept for the next call (in the cache it
#                                sends back; the graph API's plans are not yet kept, so the
#                                steps with it search again); the first step's compilation and
#                                search show apart (`start-up`);
#                                the output ends with one table (bench/gpu_table.py): ms, the
#                                speed beside LeRobot's 36.5 / 59.5 ms, the GPU's busy share.
#   scripts/gpu-run.sh nccl      NCCL's sums on the one GPU (issue 60; `bench nccl-check`,
#                                bench-fusion): a world of one (its sum bit-equal to no sum, the
#                                all-reduce of PushT's 1.05 GB timed), then two ranks on the one
#                                GPU as torchrun would start them (NCCL_HOSTID per rank, no P2P,
#                                no shared memory, sockets on lo: correctness only), their exact
#                                sums, the broadcast and a four-step run of the tiny policy, whose
#                                losses the two ranks print (they must be the same)
#   scripts/gpu-run.sh graph     a CUDA graph captured and replayed (issue 59; `bench gpu-check
#                                --only cuda-graph`, bench-fusion): a convolution, a ReLU, a mean
#                                and a product replayed against their eager run, to the bit,
#                                before and after the input is written in place; a recording
#                                that allocates refused; nodes and ms a run; then the tiny
#                                policy's training step (`cuda-graph-step`) ten steps eager, fed
#                                from kept buffers and captured after three, in f32 and bf16, the
#                                same bits three ways, nodes and ms a step (about two minutes)
#   scripts/gpu-run.sh profile   each kernel's GPU time (Nsight Compute) in fusion's PushT step,
#                                f32 and bf16 at batch 64, and cuDNN's chosen algorithms
#   scripts/gpu-run.sh frames    real-size frames on the device against the loader's copies and
#                                the upload: aloha-real's four 480x640 cameras as images
#                                (EPISODES, default 4), an RGB frame cache, fusion's PushT-classic
#                                step at batch 64 and 256 with the real loop, without and with
#                                --frames-on-device
#
# The binaries, the wheels and the synthetic datasets are unpacked into /tmp/lerobot-rs-gpu once
# and reused by the next calls while the machine is held. DEVICE=cpu, GPU_CHECK_DEVICES=cpu,
# BATCHES=8 and STEPS=2 try the stages on a machine without a GPU; POLICIES and PRECISIONS narrow
# the sweep (default classic,tiny and f32,bf16,f16). BENCH=untuned runs the checks and the sweep
# with bench-untuned: burn's backends without autotuning and fusion, one fixed kernel per
# operation (far fewer compilations on a fresh machine). While a stage runs, nvidia-smi samples the
# GPU's memory and utilisation twice a second into $OUT/smi-<stage>.csv (peak memory, busy share).
set -euo pipefail
cd "$(dirname "$0")/.."

stage=${1:?usage: scripts/gpu-run.sh checks|ours|ours-aloha|lerobot|cudnn|best|nccl|graph|profile|frames}
device=${DEVICE:-cuda}
batches=${BATCHES:-64,256}
steps=${STEPS:-10}
out=${OUT:-/tmp/gpu-out}
limit=${STAGE_SECONDS:-560} # the stage's program is stopped after this, and what it wrote kept
work=/tmp/lerobot-rs-gpu
bin=$work/bin
bench=$bin/bench${BENCH:+-$BENCH}
data=$work/data
mkdir -p "$out" "$work"

if [ ! -x "$bench" ]; then
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' target/gpu-kit/bin.tar.xz "$work"
fi
{ nvidia-smi; echo; uname -a; nproc; } > "$out/machine.txt" 2>&1 || true
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv -lms 500 > "$out/smi-$stage.csv" 2>&1 &
  smi=$!
fi

# cubecl (the compiler under burn's cuda and wgpu backends) compiles every kernel at its first use
# and autotunes matrix products and convolutions per shape: minutes on a fresh machine. It keeps
# both in $CUBECL_CACHE (default target/gpu-cache: tar it back under $OUT and carry it on the next
# call), and logs what it compiles and which kernels autotune picks; compile-progress.txt counts
# the compilations every 10 s. STAGE_SECONDS (default 560) bounds the stage's program. Each stage
# ends by packing the cache into $OUT/gpu-cache.tar.xz (2.5 MB after 740 kernels); copied here to
# target/gpu-kit/gpu-cache.tar.xz, the next call (a fresh machine) starts from it. PushT's model
# compiled over 740 kernels in 745 s without ending its warm-up (bench/RESULTS.md): warm the cache
# first, with `POLICIES=classic PRECISIONS=f32 BATCHES=64 STEPS=1 scripts/gpu-run.sh ours`, over as
# many calls as it takes. The device tool returns at most 8 files: end the command with
# `cd $OUT && tar cf all.tar --remove-files $(ls | grep -v gpu-cache)`.
# cubecl keeps PTX, which the driver still compiles to the GPU's code at each load: the driver's
# own cache of that (CUDA_CACHE_PATH) travels in the same folder, large enough to keep it all.
cache=${CUBECL_CACHE:-$PWD/target/gpu-cache}
export CUDA_CACHE_PATH=$cache/nv CUDA_CACHE_MAXSIZE=4294967296
if [ ! -d "$cache" ] && [ -f target/gpu-kit/gpu-cache.tar.xz ]; then
  # The cache an earlier call sent back (copied into the kit here), carried with the kit.
  mkdir -p "$cache" && tar -C "$cache" -xJf target/gpu-kit/gpu-cache.tar.xz
fi
mkdir -p "$cache"
cat > "$work/cubecl.toml" <<EOF
[compilation]
cache = { file = "$cache/compilation" }
[compilation.logger]
level = "basic"
file = "$work/cubecl-compilation-$stage.log"
[autotune]
cache = { file = "$cache/autotune" }
[autotune.logger]
level = "minimal"
file = "$work/cubecl-autotune-$stage.log"
EOF
touch "$work/cubecl-compilation-$stage.log"
while sleep 10; do echo "$(date +%T) $(wc -l < "$work/cubecl-compilation-$stage.log")"; done > "$out/compile-progress-$stage.txt" &
progress=$!
# The compiled kernels sit in a folder named by our kernels' code (kernels/src/backend/kernel_cache.rs):
# the cache sent back keeps the newest such folder, cuDNN's kept algorithms and the autotune cache,
# not an older build's kernels, which no later kit reads.
prune_cache() {
  local newest entry
  newest=$(ls -dt "$cache"/compilation/code-* 2>/dev/null | head -1)
  for entry in "$cache"/compilation/*; do
    if [ "$entry" != "$newest" ] && [ "$(basename "$entry")" != cudnn ]; then rm -rf "$entry"; fi
  done
}
trap 'kill ${smi:-} $progress 2>/dev/null || true; cp "$work"/cubecl-*-"$stage".log "$out/" 2>/dev/null || true
      prune_cache 2>/dev/null || true; tar -C "$cache" -cJf "$out/gpu-cache.tar.xz" . 2>/dev/null || true' EXIT

# Datasets with their images in parquet (this build has no FFmpeg), for the sweeps.
for preset in pusht-like aloha-like; do
  if [[ " cudnn best nccl graph profile frames " != *" $stage "* ]] && [ ! -f "$data/$preset/meta/info.json" ]; then
    "$bin/datasets" synth --preset "$preset" --codec images --out "$data/$preset"
  fi
done

case "$stage" in
  checks)
    # wgpu needs a Vulkan loader: the machine's, or the one the kit carries (unpacked into /tmp),
    # pointed at the NVIDIA driver's ICD where the loader does not find it by itself.
    checks=${GPU_CHECK_DEVICES:-cuda,wgpu}
    if ! ldconfig -p | grep -q libvulkan && compgen -G "target/gpu-kit/vulkan/*.deb" >/dev/null; then
      for deb in target/gpu-kit/vulkan/*.deb; do dpkg -x "$deb" "$work/vulkan"; done
      export LD_LIBRARY_PATH="$work/vulkan/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
      if [ -f "$icd" ] && [ -z "${VK_DRIVER_FILES:-}" ]; then export VK_DRIVER_FILES=$icd; fi
      echo "Vulkan loader: the kit's ($LD_LIBRARY_PATH)" | tee "$out/checks.txt"
    fi
    (cd "$work" && timeout -k 10 "$limit" "$bench" gpu-check --devices "$checks" --work "$work/check") 2>&1 | tee -a "$out/checks.txt"
    ;;
  ours | ours-aloha)
    if [ "$stage" = ours ]; then preset=pusht-like policies=classic,tiny; else preset=aloha-like policies=classic; fi
    policies=${POLICIES:-$policies}
    (cd "$work" && timeout -k 10 "$limit" "$bench" sweep --root "$data/$preset" --device "$device" --workers 2,4,8 --loader-batch 64,256 \
      --loader-seconds 2 --policies "$policies" --train-batch "$batches" --precisions "${PRECISIONS:-f32,bf16,f16}" \
      --warmup 5 --steps "$steps" --loop-steps $((2 * steps)) --train-workers 4 \
      --out "$work/sweep-$preset" --results "$out/results-$preset.md") 2>&1 | tee "$out/sweep-$preset.log" || echo "the sweep stopped early: the cells it ended are in sweep-$preset.log"
    tar -C "$work" -cf "$out/sweep-$preset-${policies//,/-}.tar" "sweep-$preset"
    ;;
  lerobot)
    site=$work/site
    if [ ! -d "$site/lerobot" ]; then
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" \
        target/gpu-kit/wheels/*.whl
      cp -r bench/lerobot/av_stub/av bench/lerobot/av_stub/av-0.0.0+stub.dist-info "$site/"
    fi
    PYTHONPATH=$site PYTHONUNBUFFERED=1 timeout -k 10 "$limit" python3 bench/lerobot/train_step_gpu.py --root "$data/pusht-like" \
      --batch-sizes ${batches//,/ } --modes f32 bf16 --warmup 5 --steps $((2 * steps)) --device "$device" \
      --out "$out/lerobot_gpu.json" \
      2>&1 | tee "$out/lerobot_gpu.log"
    ;;
  cudnn)
    fixture=$PWD/tests/fixtures/lerobot-0.6.1/pusht_images
    {
      echo "python3's site-packages: $(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
      ls -d "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"/nvidia/*/lib 2>&1 || true
      ldconfig -p | grep -E 'cudnn|cublas' || echo "no cuDNN or cuBLAS in the library cache"
    } > "$out/libraries.txt" 2>&1
    BUILDS=${BUILDS:-untuned fusion}
    # Each step is bounded by its own seconds and by what is left of the stage's $limit, so the
    # call ends in time to send back what it measured; the steps run most telling first.
    deadline=$(( $(date +%s) + limit ))
    step() { # build (untuned or fusion), label, seconds, then train-step's arguments
      local build=$1 label=$2 seconds=$3; shift 3
      [[ " ${BUILDS//,/ } " == *" $build "* ]] || return 0
      local left=$(( deadline - $(date +%s) ))
      if [ "$left" -lt 20 ]; then
        echo "== bench-$build, $label: skipped, the stage's $limit s are spent" | tee -a "$out/steps.txt"
        return 0
      fi
      # timeout's -k adds up to 10 s after its limit.
      [ "$seconds" -le $((left - 10)) ] || seconds=$((left - 10))
      echo "== bench-$build, $label ($(date +%T), at most $seconds s)" | tee -a "$out/steps.txt"
      (cd "$work" && timeout -k 10 "$seconds" "$bin/bench-$build" train-step --root "$fixture" --device cuda "$@") 2>&1 \
        | tee -a "$out/steps.txt" || echo "stopped: $label" | tee -a "$out/steps.txt"
    }
    (cd "$work" && RUST_LOG=kernels=info timeout -k 10 "${CHECK_SECONDS:-240}" "$bin/bench-untuned" gpu-check --devices cuda \
      --work "$work/check" ${CHECK_ONLY:+--only "$CHECK_ONLY"}) 2>&1 | tee "$out/checks.txt" \
      || echo "the checks failed or stopped" | tee -a "$out/checks.txt"
    # Timed, then counted: cubecl's launch log costs host time, so a counted step is not timed.
    # The algorithms the checks and earlier calls kept (they travel in the cache) are forgotten
    # first: the first f32 step searches (each legacy search in two rounds; `cuDNN so far` counts
    # the searches whose second round chose differently), and the steps after it take what it
    # kept (kernels/src/libraries/cudnn/kept.rs). With BUILDS=fusion, the fusion step's repetition shows
    # what that saves at start-up (its `start-up` line against the first's; each step's `cuDNN
    # so far` line counts its searches and the passes on kept algorithms). cuDNN's graph API's
    # plans are timed beside the legacy algorithms (LEROBOT_RS_CUDNN_GRAPH=1,
    # kernels/src/libraries/cudnn/graph.rs), each pass's choice logged with both times.
    rm -f "$cache"/compilation/cudnn/algorithms-*.json
    step untuned "cuDNN, f32" 120 --batch 64,256 --warmup 2 --steps 5
    RUST_LOG=${RUST_LOG:-kernels::libraries::cudnn=debug} \
      step fusion "cuDNN, f32, then the real loop" 200 --batch 64,256 --warmup 2 --steps 5 --loop-steps 20 --num-workers 4
    LEROBOT_RS_CONV1D=cublas \
      step fusion "cuDNN for the encoder, the U-Net's 1-D convolutions as cuBLAS's products, f32" 90 \
      --batch 64,256 --warmup 2 --steps 5
    RUST_LOG=${RUST_LOG:-kernels::libraries::cudnn=debug} LEROBOT_RS_CUDNN_GRAPH=1 \
      step fusion "cuDNN with its graph API, f32" 120 --batch 64,256 --warmup 2 --steps 5
    LEROBOT_RS_CONV1D=burn \
      step fusion "cuDNN for the encoder, the U-Net's 1-D convolutions as burn's matrix product, f32" 90 \
      --batch 64,256 --warmup 2 --steps 5
    step fusion "cuDNN, bf16" 80 --batch 64 --warmup 2 --steps 5 --precision bf16
    LEROBOT_RS_CONV1D=cublas \
      step fusion "cuDNN for the encoder, the U-Net's 1-D convolutions as cuBLAS's products, bf16" 60 \
      --batch 64 --warmup 2 --steps 5 --precision bf16
    step fusion "cuDNN, f32, algorithms kept by the steps above" 60 --batch 64 --warmup 2 --steps 5
    RUST_LOG=${RUST_LOG:-kernels::libraries::cudnn=debug} LEROBOT_RS_CUDNN_GRAPH=1 \
      step fusion "cuDNN with its graph API, bf16" 80 --batch 64 --warmup 2 --steps 5 --precision bf16
    step fusion "cuDNN, f32, launches counted" 60 --batch 64 --warmup 1 --steps 1 --count-launches
    # The gradients' gather 64 and 106 parameters a launch (PushT's 212 in four and two, so
    # clipping and the update in 5 and 3 launches; by default 71, three launches, 4): each
    # start-up line, beside the default's above, says what the width costs to compile.
    LEROBOT_RS_PARTS_PER_LAUNCH=64 \
      step fusion "cuDNN, f32, the gather 64 parameters a launch, launches counted" 90 --batch 64 --warmup 1 \
      --steps 1 --count-launches
    LEROBOT_RS_PARTS_PER_LAUNCH=106 \
      step fusion "cuDNN, f32, the gather 106 parameters a launch, launches counted" 90 --batch 64 --warmup 1 \
      --steps 1 --count-launches
    step untuned "cuDNN, f32, launches counted" 60 --batch 64 --warmup 1 --steps 1 --count-launches
    step fusion "cuDNN, bf16, launches counted" 60 --batch 64 --warmup 1 --steps 1 --precision bf16 --count-launches
    if [ -n "${BASELINE:-}" ]; then
      export LEROBOT_RS_CUDNN=0
      step untuned "burn's convolutions, f32" 90 --batch 64 --warmup 1 --steps 3
    fi
    ;;
  best)
    # The steps in order of expected value, each with its seconds; what the stage's seconds do not
    # reach is said to be skipped, and TABLE_SECONDS stay for the table. Every line of the steps'
    # output is stamped with the time it was printed (bench/gpu_table.py reads the GPU's busy
    # share over each row's timed steps from nvidia-smi's samples). The legacy algorithms cuDNN's
    # searches choose are kept (kernels/src/libraries/cudnn/kept.rs) and go back in the cache, so
    # a later call starts from them; the graph API's plans are not kept (a search with it runs
    # again each call).
    fixture=$PWD/tests/fixtures/lerobot-0.6.1/pusht_images
    timed=${STEPS:-30}
    deadline=$(( $(date +%s) + limit - ${TABLE_SECONDS:-15} ))
    log=$out/steps.txt
    # bash 5's $EPOCHREALTIME; a last line without its newline (a step cut short) is kept too.
    stamp() { while IFS= read -r line || [ -n "$line" ]; do printf '%s %s\n' "$EPOCHREALTIME" "$line"; done; }
    fastest=(LEROBOT_RS_CUDNN_GRAPH=1 LEROBOT_RS_CONV1D=cublas LEROBOT_RS_LINEAR=cublas)
    loop_steps=20
    budget() { # the seconds a step may take: its own, or what is left before the deadline
      local want=$1 left=$(( deadline - $(date +%s) - 10 ))
      [ "$want" -le "$left" ] && echo "$want" || echo "$left"
    }
    run() { # seconds, label, then the command (environment assignments first); with planning
      # set, only says what the step is and how long it may take
      local seconds label=$2
      if [ -n "${planning:-}" ]; then echo "   at most $1 s: $label"; return 0; fi
      seconds=$(budget "$1"); shift 2
      if [ "$seconds" -lt 20 ]; then
        echo "== bench-fusion, $label: skipped, the stage's $limit s are spent" | stamp | tee -a "$log"
        return 0
      fi
      echo "== bench-fusion, $label ($(date +%T), at most $seconds s)" | stamp | tee -a "$log"
      (cd "$work" && env "$@" timeout -k 10 "$seconds" "$bin/bench-fusion" ${run_args[@]+"${run_args[@]}"}) 2>&1 | stamp \
        | tee -a "$log" || echo "stopped: $label" | stamp | tee -a "$log"
    }
    steps() { # the steps, in order of expected value
      local train_step=(train-step --root "$fixture" --device cuda --warmup 2 --steps "$timed")
      run_args=(gpu-check --devices cuda --work "$work/check" --only cudnn)
      run 90 "the cuDNN checks" RUST_LOG=kernels=info
      run_args=("${train_step[@]}" --batch 64,256)
      run 150 "predicted fastest: cuDNN's graph API beside its legacy search, 1-D and Linear as cuBLAS, f32" "${fastest[@]}" \
        RUST_LOG=${RUST_LOG:-kernels::libraries::cudnn=debug}
      run_args=("${train_step[@]}" --batch 64,256 --precision bf16)
      run 100 "predicted fastest, bf16" "${fastest[@]}" RUST_LOG=${RUST_LOG:-kernels::libraries::cudnn=debug}
      run 70 "predicted fastest, bf16, the encoder's maps channels-last (NHWC, KRSC weights)" "${fastest[@]}" \
        LEROBOT_RS_CHANNELS_LAST=1 RUST_LOG=${RUST_LOG:-kernels::libraries::cudnn=debug}
      # The step captured as a CUDA graph after three fed steps (trainer/src/step/graph.rs),
      # never yet run: the host's share of a step at 64, where it sets the pace.
      run_args=(train-step --root "$fixture" --device cuda --warmup 5 --steps "$timed" --batch 64)
      run 60 "predicted fastest, f32, the step captured as a CUDA graph" "${fastest[@]}" LEROBOT_RS_CUDA_GRAPH=1 \
        RUST_LOG=${RUST_LOG:-trainer=info}
      run_args=("${train_step[@]}" --batch 64,256)
      run 80 "today's default: cuDNN's legacy search, 1-D in cuDNN, f32" LEROBOT_RS_CUDNN_GRAPH=0 LEROBOT_RS_CONV1D=cudnn
      run_args=("${train_step[@]}" --batch 256 --loop-steps "$loop_steps" --num-workers 8)
      run 70 "predicted fastest, f32, the real loop" "${fastest[@]}"
    }
    {
      echo "== the plan: $limit s in all, ${TABLE_SECONDS:-15} of them kept for the table"
      planning=1 steps
    } | stamp | tee -a "$log"
    steps
    sleep 1 # nvidia-smi's last sample
    echo
    echo "== the steps beside LeRobot 0.6.1's (bench/gpu_table.py; LeRobot's means from the third contact)"
    python3 bench/gpu_table.py "$log" "$out/smi-$stage.csv" --steps "$timed" --loop-steps "$loop_steps" | tee "$out/table.md"
    ;;
  graph)
    (cd "$work" && RUST_LOG=kernels=info,trainer=info timeout -k 10 "${CHECK_SECONDS:-240}" "$bin/bench-fusion" gpu-check --devices cuda \
      --work "$work/check" --only cuda-graph) 2>&1 | tee "$out/graph.txt" || echo "stopped: the CUDA graph check" | tee -a "$out/graph.txt"
    ;;
  nccl)
    # NCCL from PyTorch's wheel (nvidia-nccl-cu13), found by the trainer in python3's
    # site-packages. Each run is bounded; the two ranks are killed together if either hangs.
    {
      ls "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"/nvidia/nccl/lib 2>&1 || true
    } > "$out/libraries.txt" 2>&1
    echo "== a world of one ($(date +%T))" | tee -a "$out/steps.txt"
    (cd "$work" && timeout -k 10 120 "$bin/bench-fusion" nccl-check --work "$work/nccl-one") 2>&1 | tee -a "$out/steps.txt" \
      || echo "stopped: a world of one" | tee -a "$out/steps.txt"
    echo "== two ranks on the one GPU ($(date +%T))" | tee -a "$out/steps.txt"
    # A fresh run folder (a warm machine keeps the last call's); rank 1 compiles into a kernel
    # cache of its own (a copy of the shared one), so that the two never write one file at once.
    rm -rf "$work/nccl-two" "$work/rank1" && mkdir -p "$work/rank1"
    cp -r "$cache" "$work/rank1/cache"
    sed "s#$cache#$work/rank1/cache#g; s#$work/cubecl-#$work/rank1/cubecl-#g" "$work/cubecl.toml" > "$work/rank1/cubecl.toml"
    ranks=()
    for rank in 0 1; do
      if [ "$rank" = 0 ]; then dir=$work; else dir=$work/rank1; fi
      (cd "$dir" && WORLD_SIZE=2 RANK=$rank LOCAL_RANK=$rank MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 \
        NCCL_HOSTID=rank$rank NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo NCCL_DEBUG=WARN \
        timeout -k 10 300 "$bin/bench-fusion" nccl-check --cuda-device 0 --elements 67108864 --train \
        --work "$work/nccl-two") > "$out/nccl-rank$rank.txt" 2>&1 &
      ranks+=($!)
    done
    # The two ranks only: the stage's samplers run in the background too.
    wait "${ranks[@]}" || true
    cat "$out/nccl-rank0.txt" "$out/nccl-rank1.txt" | tee -a "$out/steps.txt"
    losses() { grep -o 'losses .*' "$out/nccl-rank$1.txt" || echo "rank $1: no losses"; }
    if [ "$(losses 0)" = "$(losses 1)" ]; then
      echo "== the two ranks' losses agree: $(losses 0)" | tee -a "$out/steps.txt"
    else
      echo "== FAILED: the two ranks' losses differ: $(losses 0) / $(losses 1)" | tee -a "$out/steps.txt"
    fi
    ;;
  profile)
    # Each kernel's GPU time (Nsight Compute, one metric, clocks and caches left alone) in the
    # last of two steps of fusion's build at batch 64, f32 and bf16: ncu-<precision>.csv, summed
    # by kernel with bench/ncu_summary.py, and cuDNN's chosen algorithms (RUST_LOG=kernels=debug)
    # in ncu-<precision>.log. ncu runs each profiled kernel alone (the GPU's work, none of the
    # host's). Only the timed step is profiled: train-step marks it as CUDA's profiler range
    # (--profiler-range) and ncu profiles from its start (--profile-from-start off), so the
    # model's initialisation and the warm-up step with cuDNN's algorithm search run unprofiled,
    # and cuDNN times its candidates as in a run of its own, whatever the build launches before.
    fixture=$PWD/tests/fixtures/lerobot-0.6.1/pusht_images
    ncu=$(command -v ncu || compgen -G "/opt/nvidia/nsight-compute/*/ncu" | sort -V | tail -1 || true)
    [ -n "$ncu" ] || { echo "no ncu on this machine" | tee "$out/steps.txt"; exit 1; }
    for precision in f32 bf16; do
      echo "== ncu, bench-fusion, $precision, the timed step" | tee -a "$out/steps.txt"
      (cd "$work" && RUST_LOG=kernels=debug timeout -k 10 "${PROFILE_SECONDS:-120}" "$ncu" --clock-control none \
        --cache-control none --profile-from-start off --metrics gpu__time_duration.sum --csv \
        --log-file "$out/ncu-$precision.csv" "$bin/bench-fusion" train-step --root "$fixture" --device cuda \
        --batch 64 --warmup 1 --steps 1 --precision "$precision" --profiler-range) > "$out/ncu-$precision.log" 2>&1 \
        || echo "ncu stopped: $precision" | tee -a "$out/steps.txt"
    done
    ;;
  frames)
    # The prepare phase and the real loop's rate with the frames uploaded each step (copied by
    # the loader, then into the page-locked buffer) against gathered on the device. The stage's
    # seconds count from here: the dataset and its cache are made within them.
    deadline=$(( $(date +%s) + limit ))
    episodes=${EPISODES:-4}
    real=$data/aloha-real-images-$episodes frames=$data/aloha-real-frames-$episodes
    # Each made aside and moved into place, so that one cut short is never read; a failure
    # ends the stage, its log's end in steps.txt.
    made() { # what, folder, then the command, which writes into "$folder.partial"
      local what=$1 folder=$2; shift 2
      [ -e "$folder" ] && return 0
      rm -rf "$folder.partial"
      if ! { time "$@"; } > "$out/$what.log" 2>&1; then
        { echo "== $what failed"; tail -20 "$out/$what.log"; } | tee -a "$out/steps.txt"
        exit 1
      fi
      { echo "== $what"; tail -5 "$out/$what.log"; } | tee -a "$out/steps.txt"
      mv "$folder.partial" "$folder"
    }
    made synth "$real" "$bin/datasets" synth --preset aloha-real --codec images --episodes "$episodes" --out "$real.partial"
    made cache "$frames" "$bin/datasets" cache --root "$real" --out "$frames.partial"
    baseline=
    for on_device in "" --frames-on-device; do
      # The first run takes half of what is left, the second the rest.
      runs_left=$([ -z "$on_device" ] && echo 2 || echo 1)
      seconds=$(( (deadline - $(date +%s)) / runs_left - 10 ))
      # The frames on the device only beside the run that uploads them.
      if [ "$seconds" -lt 20 ] || { [ -n "$on_device" ] && [ -z "$baseline" ]; }; then
        echo "== aloha-real ${on_device:-(frames uploaded)}: skipped, the stage's $limit s are spent" | tee -a "$out/steps.txt"
        continue
      fi
      baseline=ran
      echo "== bench-fusion, aloha-real ${on_device:-(frames uploaded)} ($(date +%T), at most $seconds s)" | tee -a "$out/steps.txt"
      (cd "$work" && timeout -k 10 "$seconds" "$bin/bench-fusion" train-step --root "$real" \
        --frame-cache "$frames" $on_device --device cuda --batch 64,256 --warmup 2 --steps 5 \
        --loop-steps 20 --num-workers 8) 2>&1 | tee -a "$out/steps.txt" || echo "stopped: ${on_device:-uploaded}" | tee -a "$out/steps.txt"
    done
    ;;
  *)
    echo "unknown stage $stage: checks, ours, ours-aloha, lerobot, cudnn, best, nccl, profile or frames" >&2
    exit 2
    ;;
esac
