#!/usr/bin/env bash
# The next device call, whichever card comes (docs/benchmarks/PENDING.md's rule; calls naming nvidia-h200
# were given an H100 seven sessions running by 2026-12-06). The table (PENDING item 1): one 80-epoch masked-LM
# encoder, the three recipes with seed 1, then more seeds while time is left. On an H200 that is issue 4's
# table. On any other card the same encoder serves PENDING item 2, R-Drop (--set rdrop_alpha=4) paired by
# seed with the recipe as it is, `optimized` then `guide`; ITEM_LARGE=tally runs item 3 instead, more runs of
# the recipes for the accuracy tally. That encoder lives in /tmp/dgxperf-pretrain-large.
# ITEM=base runs the table's runs at preset base (12 x 768; done on an H100 on 2026-12-06,
# docs/benchmarks/2026-12-06-h100-base-preset/), its encoder in /tmp/dgxperf-pretrain-base.
# ITEM=graphs or ITEM=ablation runs instead the two measurements that need no encoder, done on an H100 on
# 2026-12-06 (docs/benchmarks/2026-12-06-h100-graphs-ablation/): the graphed step under the profiler and
# the compile probe (capture_graphs.sh), or the ablation with every batch shape warmed up
# (capture_validate.sh with the other phases skipped, resumed from /tmp until validate.json says complete).
# The same command every call, carrying .data:
#   OUT=$OUT bash scripts/h200/capture_next.sh
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
if [[ "$item" == table || "$item" == base ]]; then
  if [[ "$item" == base ]]; then
    echo "== ${card:-no GPU named}: the table's runs at preset base (done on an H100 on 2026-12-06)"
    preset=base keep=/tmp/dgxperf-pretrain-base
    runs="optimized:1 guide:1 baseline:1 optimized:2 guide:2 baseline:2 optimized:3 guide:3 baseline:3"
  elif [[ "$card" == *H200* ]]; then
    echo "== ${card}: the table (PENDING item 1)"
    preset=large keep=/tmp/dgxperf-pretrain-h200
    runs="optimized:1 guide:1 baseline:1 optimized:2 guide:2 optimized:3 guide:3 baseline:2"
  else
    preset=large keep=/tmp/dgxperf-pretrain-large
    if [[ "${ITEM_LARGE:-rdrop}" == rdrop ]]; then
      echo "== ${card:-no GPU named}: R-Drop paired with the recipe by seed (PENDING item 2; item 1 needs an H200)"
      # each seed with and without, from one encoder; optimized first (~60 s a run on an H100, ~1.4-1.9x with
      # R-Drop), then guide's pair; a run that would not fit what is left of a call waits for the next
      runs="optimized:1 optimized:1:rdrop_alpha=4 optimized:2 optimized:2:rdrop_alpha=4 optimized:3"
      runs+=" optimized:3:rdrop_alpha=4 guide:1 guide:1:rdrop_alpha=4 optimized:4 optimized:4:rdrop_alpha=4"
    else  # ITEM_LARGE=tally
      echo "== ${card:-no GPU named}: more large runs for the accuracy tally (PENDING item 3; item 1 needs an H200)"
      # baseline and guide have the fewest runs in the tally. On an H100 a fine-tune from an encoder takes
      # ~250 s (baseline), ~100 s (guide), ~50 s (optimized): call 2 runs baseline 1, guide 1-2 and optimized 2,
      # call 3 the rest; a run that would not fit what is left of a call waits for the next (capture_seeds.sh)
      runs="optimized:1 baseline:1 guide:1 guide:2 optimized:2 baseline:2 guide:3 optimized:3 baseline:3"
    fi
  fi
  runs="${RUNS:-$runs}"
  # 540 s: 80 epochs took 442 s with start-up on the H200 (2026-12-04), before the held-out passes were added;
  # a pretraining cut after epoch 79 would resume from epoch 60. Seed 1 of optimized may then wait a call.
  OUT=$OUT VALIDATE=no BUDGET_S=540 KEEP=$keep PRESET=$preset bash "$here/capture_table.sh"
  OUT=$OUT KEEP_DONE=yes RUN_LIMIT_S=300 RUNS="$runs" ENCODER="$keep/$preset" SET="preset=$preset" \
    END_S=$((590 - SECONDS)) STOP_AFTER_S=$((500 - SECONDS)) bash "$here/capture_seeds.sh"
elif [[ "$item" == graphs ]]; then
  echo "== ${card:-no GPU named}: the graphed step under the profiler, and the compile probe"
  OUT=$OUT bash "$here/capture_graphs.sh"
elif [[ "$item" == ablation ]]; then
  echo "== ${card:-no GPU named}: the ablation with every batch shape warmed up"
  OUT=$OUT RUN=/tmp/dgxperf-validate-ablation LIMIT_S=540 \
    EXTRA="--skip doctor --skip bench --skip pretrain --skip train --skip advise" bash "$here/capture_validate.sh"
else
  echo "ITEM=$item: expected table, base, graphs or ablation" >&2
  exit 2
fi
