#!/usr/bin/env bash
# Shared-prefix benchmark (issue 6): 64 requests whose prompts share a ~1,000-token head (a long
# system prompt), run by `docpipe run` with the shared head computed once (default) and with
# sharing turned off (DOCPIPE_NO_PREFIX=1). Prints both wall times and their ratio.
#
#   bash tests/bench/prefix.sh [MODEL.gguf] [THREADS]
# Without MODEL it makes a random-weight qwen35 model (hidden 512, 8 layers) in a temp folder.
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
for i in $(seq 1 64); do printf 'Ticket %s: the export job failed at step %s.' "$i" "$((i % 7))" > "$work/in/t$i.txt"; done
# a system prompt of a little over 1,024 tokens (the head is shared in whole 256-token pieces)
sys=$(for i in $(seq 1 35); do printf 'Rule %s: answer briefly and cite the ticket. ' "$i"; done)
cat > "$work/job.yaml" <<YAML
model:
  path: $model
  context: 2048
  threads: $threads
  max_sequences: 8
inputs:
  - path: in
prompts:
  system: "$sys"
  template: "Triage this ticket: {{content}}"
generation:
  max_tokens: 8
outputs:
  jsonl: out/r.jsonl
YAML
run() {
    rm -rf "$work/out" "$work/state"
    local t0 t1
    t0=$(date +%s.%N)
    env "$@" "$bin" run "$work/job.yaml" --quiet
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc
}
shared=$(run DOCPIPE_NO_PREFIX=0)
plain=$(run DOCPIPE_NO_PREFIX=1)
prompt=$(grep -o '"prompt_tokens":[0-9]*' "$work/out/r.jsonl" | sed -n 1p | cut -d: -f2)
echo "64 requests, prompt ${prompt} tokens each, ${threads} threads, $(basename "$model")"
echo "shared head computed once: ${shared} s"
echo "every request computes it: ${plain} s"
echo "speed-up: $(echo "scale=2; $plain / $shared" | bc)x"
