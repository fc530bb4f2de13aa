#!/usr/bin/env bash
# Recordings for `dgxperf monitor` / `advise` (issue 5) on the lent H200: one recording per workload while
# `dgxperf monitor --record` samples at 1 Hz, then the live sampling cost and the exporter's scrape latency.
# Usage (repository root, GPU machine): OUT=dir SECONDS_EACH=30 bash scripts/h200/capture_monitor.sh
set -uo pipefail
OUT="${OUT:?set OUT}"
EACH="${SECONDS_EACH:-30}"
# shellcheck source=scripts/h200/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
export DGXPERF_HOME="$OUT/home"
log="$OUT/log-monitor.txt"
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  # MODES="starved_swing cpu_bound h2d_pinned near_capacity iowait": the rules no recording has fired yet
  for mode in ${MODES:-idle gemm memory starved h2d}; do
    echo "== recording $mode ($EACH s)"
    python3 -m dgxperf monitor --record "$OUT/rec-$mode.jsonl" --duration $((EACH + 4)) --interval 1 --quiet &
    recorder=$!
    sleep 2
    python3 scripts/h200/workloads.py "$mode" "$EACH"
    echo "workload exit $?"
    wait "$recorder"
    echo "recorder exit $?"
  done
  # SKIP_COST=1: the sampling cost was measured already (docs/benchmarks/2026-12-03-h200-monitor.md)
  [[ -n "${SKIP_COST:-}" ]] || echo "== sampling cost, live NVML at 1 Hz"
  [[ -n "${SKIP_COST:-}" ]] || python3 -c 'from dgxperf.monitor.sources import LiveSource; from dgxperf.monitor.view import measure_sampling_cost; import json; s = LiveSource(1.0); print(json.dumps(measure_sampling_cost(s, 30))); s.close()'
} > "$log" 2>&1
rm -rf "${OUT:?}/home"
tail -n 30 "$log"
