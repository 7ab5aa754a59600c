#!/usr/bin/env bash
# The quick start for an installed docpipe (package or `cmake --install`): copies the examples
# next to it into a folder you can write to (default ./docpipe-examples), makes a small
# random-weight Qwen3.5-layout model there (Q4_K_M, as the real files are) and runs the
# nightly-summary job over the example documents. The model's text is meaningless by design;
# point model.path in jobs/nightly-summary.yaml at your own GGUF file for real summaries.
#
#   bash /usr/share/doc/docpipe/examples/try-installed.sh [FOLDER]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dest=${1:-docpipe-examples}
docpipe=${DOCPIPE:-docpipe}
command -v "$docpipe" >/dev/null || { echo "try-installed.sh: docpipe is not on PATH" >&2; exit 1; }
mkdir -p "$dest"
cp -R "$here/jobs" "$here/docs" "$here/code" "$here/corpus" "$dest/"
mkdir -p "$dest/models"
if [[ ! -f "$dest/models/tiny-qwen35-q4_k_m.gguf" ]]; then
    "$docpipe" make-test-model --arch qwen35 --hidden 256 --ffn 768 --layers 8 --head-dim 64 --ssm-dim 64 \
        --out "$dest/models/tiny-qwen35-f16.gguf"
    "$docpipe" quantize "$dest/models/tiny-qwen35-f16.gguf" "$dest/models/tiny-qwen35-q4_k_m.gguf" q4_k_m --quiet
fi
job="$dest/jobs/nightly-summary.yaml"
"$docpipe" validate "$job"
rc=0
"$docpipe" run "$job" --quiet || rc=$?
if [[ $rc != 0 && $rc != 3 ]]; then exit "$rc"; fi
"$docpipe" status "$job"
echo "results: $dest/jobs/out/nightly/results.jsonl.gz"
