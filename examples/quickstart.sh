#!/usr/bin/env bash
# Quick start on a fresh Debian machine: installs the build dependencies, builds docpipe into
# build/, makes a small random-weight Qwen3.5-layout model (quantized to Q4_K_M, as the real
# files are) and runs the nightly-summary example job over examples/docs (English and Chinese:
# md, txt, html, docx, gz). Results: examples/jobs/out/nightly/results.jsonl.gz.
#
# The test model's weights are random, so its "summaries" are meaningless text: this shows the
# pipeline (chunking, map-reduce, checkpoints, output records), not a model. For real summaries,
# set model.path in examples/jobs/nightly-summary.yaml to your Qwen3.5-4B GGUF file (the one you
# run with llama.cpp, e.g. /models/Qwen3.5-4B-Q4_K_M.gguf) and raise model.context and
# generation.max_tokens; see docs/job-file.md.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/install-deps
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)"
mkdir -p examples/models
if [[ ! -f examples/models/tiny-qwen35-q4_k_m.gguf ]]; then
    build/docpipe make-test-model --arch qwen35 --hidden 256 --ffn 768 --layers 8 --head-dim 64 --ssm-dim 64 \
        --out examples/models/tiny-qwen35-f16.gguf
    build/docpipe quantize examples/models/tiny-qwen35-f16.gguf examples/models/tiny-qwen35-q4_k_m.gguf q4_k_m --quiet
fi
job=examples/jobs/nightly-summary.yaml
echo "--- docpipe validate $job"
build/docpipe validate "$job"
echo "--- docpipe plan $job"
build/docpipe plan "$job"
echo "--- docpipe run $job   (random weights: the text is meaningless by design)"
rc=0
build/docpipe run "$job" || rc=$?
if [[ $rc != 0 && $rc != 3 ]]; then exit "$rc"; fi
echo "--- the first result record (zcat examples/jobs/out/nightly/results.jsonl.gz | head -n 1)"
# (sed reads the whole stream: with head, zcat could die of SIGPIPE and pipefail end the script)
zcat examples/jobs/out/nightly/results.jsonl.gz | sed -n 1p
echo "--- docpipe status $job   (run it again: unchanged documents are skipped)"
build/docpipe status "$job"
