#!/usr/bin/env bash
# Runs `dgxperf bench` on the lent H200, then the simplest independent code for the same three figures,
# and keeps everything for docs/benchmarks/. Usage (repository root, GPU machine): OUT=dir bash this
set -uo pipefail
# shellcheck source=scripts/h200/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
OUT="${OUT:?set OUT}"
export DGXPERF_HOME="$OUT/home"
log="$OUT/log.txt"
TIMEFORMAT='wall %R s'
dg() { python3 -m dgxperf "$@"; }

{
  echo "== $(date -u +%FT%TZ) $(hostname) $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader)"
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'
  echo "== bench all --quick"; time dg bench all --quick --json > "$OUT/bench-all-quick.json"; echo "exit $?"
  echo "== bench gemm (full sweep)"; time dg bench gemm --json > "$OUT/bench-gemm.json"; echo "exit $?"
  echo "== bench memory"; time dg bench memory --json > "$OUT/bench-memory.json"; echo "exit $?"
  echo "== bench pcie"; time dg bench pcie --json > "$OUT/bench-pcie.json"; echo "exit $?"
  echo "== bench nccl, one rank, 8 B .. 1 GiB"; time dg bench nccl -b 8 -e 1G -f 4 --json > "$OUT/bench-nccl.json"; echo "exit $?"
  echo "== bad input"
  dg bench p2p; echo "exit $?"
  dg bench nccl --gpus 8; echo "exit $?"
  dg bench nccl -b 1G -e 1M; echo "exit $?"
  echo "== human views"
  dg runs list
  for id in $(seq 2 5); do dg runs show "$id" >/dev/null; done
  dg bench gemm --quick --dtype bf16 --dtype fp8
  dg bench memory --quick
  dg bench pcie --quick
  dg bench nccl -b 1M -e 64M -f 4 --op all_reduce --op broadcast
  echo "== independent simple code, alternating with dgxperf's measurement"
  time python3 scripts/h200/crosscheck.py | tee "$OUT/crosscheck.json"
} > "$log" 2>&1
rm -rf "${OUT:?}/home"
tail -n 60 "$log"
