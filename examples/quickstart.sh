#!/usr/bin/env bash
# Quick start on a fresh Debian machine: installs the build dependencies, builds docpipe into
# build/, makes a small random-weight Qwen3.5-layout model, quantizes it to Q4_K_M and shows
# what is in it. Such a model produces meaningless text; it exists so everything runs without
# a download. Point docpipe at a real Qwen3.5-4B GGUF file (the one you use with llama.cpp)
# to see your own model: build/docpipe inspect /path/to/Qwen3.5-4B-Q4_K_M.gguf
#
# The job runner (`docpipe run JOB.yaml`) is not in this build yet; this script will run
# examples/jobs/minimal.yaml once it is (see README.md, "What works today").
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/install-deps
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)"
mkdir -p examples/models
build/docpipe make-test-model --arch qwen35 --hidden 256 --ffn 768 --layers 8 --head-dim 64 --ssm-dim 64 \
    --out examples/models/tiny-qwen35-f16.gguf
build/docpipe quantize examples/models/tiny-qwen35-f16.gguf examples/models/tiny-qwen35-q4_k_m.gguf q4_k_m --quiet
build/docpipe inspect examples/models/tiny-qwen35-q4_k_m.gguf -c 8192 --seqs 4 | grep -v '^  blk\.'
echo "--- the reference job (docpipe run arrives with the pipeline; validate checks it today)"
build/docpipe validate examples/jobs/minimal.yaml
echo "--- generate (random weights: the text is meaningless by design)"
build/docpipe generate -m examples/models/tiny-qwen35-q4_k_m.gguf --chat -p "Summarize: the nightly job finished." \
    -n 24 --temp 0
