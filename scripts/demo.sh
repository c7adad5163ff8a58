#!/usr/bin/env bash
# The main job: the executor on the best device present (lavapipe when there is no GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
build/release/examples/sync_path
