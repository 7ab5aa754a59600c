#!/usr/bin/env bash
# How close `docpipe plan`'s time estimate comes to the run it estimates: a job of 48 documents
# of different lengths on a random-weight qwen35 model (which writes until max_tokens, so the
# estimate's "at most" is what happens), planned, then run. Prints both times and their ratio and
# fails when the run took less than half or more than twice the estimate. Timing: run it on an
# idle machine (a build or test beside it skews both numbers).
#
#   bash tests/bench/plan_accuracy.sh [MODEL.gguf] [THREADS]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin="$root/build/docpipe"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
model=${1:-}
threads=${2:-$(nproc)}
if [[ -z "$model" ]]; then
    model="$work/model.gguf"
    "$bin" make-test-model --arch qwen35 --hidden 512 --ffn 1536 --layers 8 --head-dim 64 --ssm-dim 64 \
        --out "$work/f16.gguf" >/dev/null
    "$bin" quantize "$work/f16.gguf" "$model" q4_k_m --quiet
fi
mkdir -p "$work/in"
for i in $(seq 1 48); do
    for k in $(seq 1 $((i % 6 * 8 + 4))); do printf 'Line %s of report %s: the nightly export went fine. ' "$k" "$i"; done \
        > "$work/in/r$i.txt"
done
cat > "$work/job.yaml" <<YAML
model:
  path: $model
  context: 1024
  threads: $threads
  max_sequences: 8
inputs:
  - path: in
prompts:
  template: "Summarize: {{content}}"
generation:
  max_tokens: 32
outputs:
  jsonl: out/results.jsonl
YAML
plan=$("$bin" plan "$work/job.yaml")
est=$(sed -n 's/.*= at most \([0-9.]*\) s.*/\1/p' <<<"$plan")
[[ -n "$est" ]] || { echo "plan printed no estimate:"; echo "$plan"; exit 1; }
t0=$(date +%s.%N)
"$bin" run "$work/job.yaml" --quiet
t1=$(date +%s.%N)
awk -v e="$est" -v a="$t0" -v b="$t1" 'BEGIN {
    run = b - a; r = run / e;
    printf "plan estimated at most %.1f s; the run took %.1f s (ratio %.2f)\n", e, run, r;
    exit !(r >= 0.5 && r <= 2.0) }'
