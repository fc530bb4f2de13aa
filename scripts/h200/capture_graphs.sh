#!/usr/bin/env bash
# Issue 4: the first GPU run of whole-step CUDA graphs (`cuda_graphs=true`), all in one call (~9 min; carry
# .data), so no second call depends on the machine staying warm:
#   OUT=$OUT bash scripts/h200/capture_graphs.sh
# 1. From scratch, one epoch each, side by side on one machine: `optimized` (graphed, its default since
#    2026-12-05; first: if the capture fails, the call learns it in about a minute), `optimized` with
#    cuda_graphs=false (the eager step), `guide` (the 3x line's reference), and `optimized` with the profiler
#    (is it one replay a step, the GPU busy?). Through
#    capture_seeds.sh, which packs the runs into $OUT/seeds.tgz after each one.
# 2. With what is left of BUDGET_S (540 s): the compile probe's step-graph, blocks and blocks-cpp variants at
#    128 x 64-token rows, each in its own process (what the step graph and the C++ wrapper gain, isolated).
set -uo pipefail
OUT="${OUT:?set OUT}"
BUDGET_S="${BUDGET_S:-540}"
here="$(dirname "${BASH_SOURCE[0]}")"
# shellcheck source=scripts/h200/env.sh
source "$here/env.sh"
export OUT
ENCODER=none EPOCHS=1 STOP_AFTER_S="${STOP_AFTER_S:-300}" \
  RUNS="${RUNS:-optimized:1 optimized:1:cuda_graphs=false guide:1 optimized:1:profile_steps=10}" \
  bash "$here/capture_seeds.sh"
left=$((BUDGET_S - SECONDS))
per=$((left / 3))
if ((per >= 60)); then
  python3 "$here/probe_cudagraph_blocks.py" --variants step-graph,blocks,blocks-cpp --timeout "$per" \
    | tee "$OUT/probe-compile.jsonl"
else
  echo "no time left for the probe: $left s of BUDGET_S" | tee "$OUT/probe-skipped.txt"
fi
