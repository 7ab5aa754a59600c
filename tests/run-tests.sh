#!/usr/bin/env bash
# Installs what is missing (Debian packages), builds docpipe with its tests into build/, and
# runs every test that needs no GPU (the 1,000-trial crash soak: ctest -L soak). The one command README.md gives for the tests.
#
#   bash tests/run-tests.sh            # build/ + ctest -LE "gpu|soak"
#   BUILD_DIR=build-x bash tests/run-tests.sh -DDP_SANITIZE=address,undefined
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/install-deps
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" "$@"
cmake --build "$BUILD_DIR" -j "$(nproc)"
ctest --test-dir "$BUILD_DIR" -LE "gpu|soak" --output-on-failure -j "$(nproc)" ${CTEST_ARGS:-}
