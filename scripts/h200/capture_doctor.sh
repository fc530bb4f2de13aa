#!/usr/bin/env bash
# Runs `dgxperf doctor` on the lent H200 and keeps what it read, for tests/data/h200/ and docs/benchmarks/.
# Usage (on the GPU machine, from the repository root): OUT=/some/dir bash scripts/h200/capture_doctor.sh
# Independent cross-checks come from nvidia-smi, which reads the same driver through its own code path.
set -uo pipefail
# shellcheck source=scripts/h200/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
OUT="${OUT:?set OUT}"
log="$OUT/log.txt"

{
  echo "== date: $(date -u +%FT%TZ)  host: $(hostname)  kernel: $(uname -r)"
  python3 -c 'import torch, pynvml, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'
  python3 -m pip show nvidia-ml-py typer rich 2>/dev/null | grep -E '^(Name|Version)'
  echo "== doctor, 3 timed runs (wall seconds, cold then warm caches)"
  TIMEFORMAT='wall %R s'
  for i in 1 2 3; do
    echo "run $i:"
    time python3 -m dgxperf doctor --json --no-save --save-snapshot "$OUT/snapshot.json" > "$OUT/doctor.json"
    echo "exit $?"
  done
  echo "== doctor, human view"
  COLUMNS=140 python3 -m dgxperf doctor --no-save --fix-script "$OUT/fix.sh"
  echo "exit $?"
  echo "== validate"
  COLUMNS=140 python3 -m dgxperf validate
  echo "exit $?"
} > "$log" 2>&1

{
  echo "== nvidia-smi --query-gpu"
  nvidia-smi --query-gpu=name,uuid,pci.bus_id,driver_version,persistence_mode,power.limit,power.default_limit,power.max_limit,ecc.mode.current,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,mig.mode.current,compute_mode,memory.total,memory.used,clocks_event_reasons.active,compute_cap --format=csv
  echo "== nvidia-smi topo -m"; nvidia-smi topo -m
  echo "== nvidia-smi -q"; nvidia-smi -q
  echo "== lspci (nvidia)"; (lspci -d 10de: 2>&1 || echo "no lspci")
  echo "== /proc/driver/nvidia/version"; cat /proc/driver/nvidia/version 2>&1
} > "$OUT/nvidia-smi.txt" 2>&1

python3 scripts/h200/gpm_under_load.py > "$OUT/gpm_under_load.json" 2>> "$log"
echo "gpm_under_load exit $?" >> "$log"
tail -n 40 "$log"
