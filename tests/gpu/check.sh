#!/usr/bin/env bash
# tests/gpu/check.sh - the prepared device check of the CUDA backend (issues #9 and #10), meant
# to fit in 8 minutes on an H200 (with --qwen35, about 12):
#   1. build with CUDA for the machine's GPU (or use a build carried here, see below)
#   2. run the gpu-labelled tests (parity with the CPU backend: every weight type's matmul on
#      both paths, the dense fixture models, batched paged decode, device selection, memory)
#   3. make a qwen3-4B-shaped Q4_K_M model on the spot (with --qwen35 a qwen35-4B-shaped one too)
#      and run `docpipe bench --device cuda` at 1, 16, 64 and 256 sequences
#   4. print a summary: test results, prompt and decode tokens/s, and decode against the
#      memory-bandwidth roofline (bytes of weights read per token)
#
# Usage (from the repository root):  bash tests/gpu/check.sh [--quick] [--qwen35]
#   --quick      skips the 4B benchmarks (steps 3-4)
#   --qwen35     benchmarks the qwen35-4B shape as well
# Environment:
#   DP_PREBUILT=DIR   binaries built elsewhere (docpipe and tests/test_gpu_*; shared libraries
#                     the machine lacks in DIR/lib): no build here
#   DP_BW_GBS=4800    the memory bandwidth for the roofline, GB/s (H200: 4800)
#   DOCPIPE_FIXTURES  where the fixtures are, when not at ../shared/fixtures
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
T0=$(date +%s)
QUICK=0
SHAPES=(qwen3-4b)
for a in "$@"; do
    case $a in
    --quick) QUICK=1 ;;
    --qwen35) SHAPES+=(qwen35-4b) ;;
    *) echo "usage: bash tests/gpu/check.sh [--quick] [--qwen35]"; exit 2 ;;
    esac
done
BW=${DP_BW_GBS:-4800}
WORK=${TMPDIR:-/tmp}/docpipe-gpu-check
mkdir -p "$WORK"
say() { printf '\n=== %s (%ds)\n' "$*" $(($(date +%s) - T0)); }

say "machine"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
command -v nvcc >/dev/null && nvcc --version | tail -1
nproc

if [[ -n "${DP_PREBUILT:-}" ]]; then
    B=$DP_PREBUILT
    export LD_LIBRARY_PATH="$B/lib:${LD_LIBRARY_PATH:-}"
    say "using the binaries in $B"
else
    B=build-gpu
    say "build (CUDA, Release)"
    [[ -d /usr/local/cuda/bin ]] && export PATH="/usr/local/cuda/bin:$PATH"
    arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.')
    if ! cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DDP_CUDA=ON ${arch:+-DCMAKE_CUDA_ARCHITECTURES=$arch} \
        >"$WORK/configure.log" 2>&1; then
        tail -20 "$WORK/configure.log"
        echo "check.sh: configure failed (missing libyaml-dev, libjansson-dev, libcmocka-dev or zlib1g-dev?);"
        echo "          build elsewhere and pass DP_PREBUILT=DIR"
        exit 2
    fi
    cmake --build "$B" -j "$(nproc)" --target docpipe test_gpu_dequant test_gpu_matmul test_gpu_model \
        >"$WORK/build.log" 2>&1 || { tail -30 "$WORK/build.log"; echo "check.sh: build failed"; exit 2; }
fi
DOCPIPE=$B/docpipe
[[ -x $DOCPIPE ]] || { echo "check.sh: no $DOCPIPE"; exit 2; }

say "gpu tests"
fails=0
for t in test_gpu_dequant test_gpu_matmul test_gpu_model; do
    if timeout 300 "$B/tests/$t" >"$WORK/$t.log" 2>&1; then r=PASS; else r=FAIL; fails=$((fails + 1)); fi
    grep -E "device|on cuda|worst|fitted|SKIPPED|FAILED|error" "$WORK/$t.log" | head -60
    echo "$t: $r"
done

bench_shape() { # $1 = make-test-model shape
    local shape=$1 F16=$WORK/$1-f16.gguf Q=$WORK/$1-q4_k_m.gguf
    say "$shape-shaped Q4_K_M model"
    if [[ ! -s $Q ]]; then
        timeout 300 "$DOCPIPE" make-test-model --shape "$shape" --out "$F16" -t "$(nproc)" &&
            timeout 300 "$DOCPIPE" quantize "$F16" "$Q" q4_k_m -t "$(nproc)" --quiet && rm -f "$F16"
    fi
    ls -l "$Q" || return 1
    say "$shape: bench --device cuda"
    timeout 300 "$DOCPIPE" bench -m "$Q" --device cuda -p 512 -n 128 -r 3 --seqs 1,16,64,256 --json \
        >"$WORK/$shape.json" 2>"$WORK/$shape.err"
    local rc=$?
    cat "$WORK/$shape.err" "$WORK/$shape.json"
    ((rc == 0)) || return 1
    # bytes read per decoded token: every weight the forward pass reads (the file's tensors; the
    # embedding table, of which one row is read, is counted whole, so the roofline is a floor)
    local wbytes
    wbytes=$("$DOCPIPE" inspect "$Q" --json 2>/dev/null | python3 -c \
        'import json,sys; print(json.load(sys.stdin)["memory"]["weights"])' 2>/dev/null || echo 0)
    python3 - "$WORK/$shape.json" "$wbytes" "$BW" "$shape" <<'EOF'
import json, sys
b = json.load(open(sys.argv[1])); w = int(sys.argv[2]); bw = float(sys.argv[3]) * 1e9
tg = b.get("tg_tok_s", 0.0)
print(f"{sys.argv[4]}: prompt {b.get('pp_tok_s', 0):.0f} tok/s; decode {tg:.1f} tok/s at batch 1")
if w:
    roof = bw / w
    print(f"  weights {w / 2**30:.2f} GiB per token: roofline {roof:.0f} tok/s; decode at {100 * tg / roof:.0f}%")
for k, v in b.get("tg_by_seqs", {}).items():
    print(f"  {k:>3} sequences: {v:.0f} tok/s aggregate")
EOF
}

if ((QUICK == 0)); then
    for shape in "${SHAPES[@]}"; do bench_shape "$shape" || fails=$((fails + 1)); done
fi

say "summary"
echo "gpu test programs failed: $fails"
exit $((fails > 0))
