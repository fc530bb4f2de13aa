#!/usr/bin/env bash
# Peak GPU memory of real `dgxperf train` runs (issue 7): the table `dgxperf plan memory` is checked against.
# Each configuration trains preset large or base on fixed-length synthetic sequences for a few steps (the
# optimizer state exists from step 1, so the peak is reached at once) and keeps torch's
# max_memory_allocated / max_memory_reserved. Usage (repository root, GPU machine): OUT=dir bash scripts/h200/measure_memory.sh
set -uo pipefail
OUT="${OUT:?set OUT}"
# shellcheck source=scripts/h200/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
export DGXPERF_HOME="$OUT/home"
# name|recipe|fields (k=v ...)
CONFIGS="${CONFIGS:-large-fp32-b32|baseline|batch_size=32
large-fp32-b64|baseline|batch_size=64
large-fp16-b32|guide|batch_size=32 memory_fraction=none
large-fp16-b96|guide|batch_size=96 memory_fraction=none
large-bf16-b64|optimized|batch_size=64
large-bf16-b128|optimized|batch_size=128
large-bf16-b256|optimized|batch_size=256
large-bf16-b128-ckpt|optimized|batch_size=128 activation_checkpointing=true
large-bf16-b512-ckpt|optimized|batch_size=512 activation_checkpointing=true
large-bf16-len512-b32|optimized|batch_size=32 max_len=512
base-bf16-b256|optimized|batch_size=256 preset=base
base-fp32-b64|baseline|batch_size=64 preset=base}"
log="$OUT/log-memory.txt"
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  while IFS='|' read -r name recipe fields; do
    [[ -z "$name" ]] && continue
    sets=(--set task=synthetic --set synthetic_samples=4096 --set padding=max --set bucketing=false
          --set compile=false --set grad_accum=1 --set lr_reference_batch=none --set rdrop_alpha=0)
    for kv in $fields; do sets+=(--set "$kv"); done
    echo "== $name: $recipe $fields"
    python3 -m dgxperf train --recipe "$recipe" "${sets[@]}" --max-steps 4 --no-checkpoint --json \
      > "$OUT/mem-$name.json"
    echo "exit $?"
  done <<< "$CONFIGS"
} > "$log" 2>&1
rm -rf "${OUT:?}/home"
tail -n 30 "$log"
