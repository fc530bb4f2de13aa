#!/usr/bin/env bash
# The next device call, whichever card comes (docs/benchmarks/PENDING.md's rule; calls naming nvidia-h200
# were given an H100 three sessions running on 2026-12-05). On an H200 the table (PENDING item 1: one 80-epoch
# masked-LM encoder, the three recipes with seed 1, then optimized and guide with more seeds that also score
# a weight average); on any other card the 256-token exploration (item 2: truncation and reinit_layers paired
# by seed, every run with ema_decay=0.99, which scores the trained weights beside their average, so each run
# measures the average's effect on itself). The same command every call, carrying .data:
#   OUT=$OUT bash scripts/h200/capture_next.sh
# Each item keeps what earlier calls on the still-warm machine finished (KEEP_DONE) and resumes a cut
# pretraining from its checkpoint, so the command is repeated until its log says every run is finished.
# Results as capture_table.sh's and capture_seeds.sh's: log-table.txt, pretrain.json, log-seeds.txt,
# monitor-seeds.{jsonl,log} and seeds.tgz.
set -uo pipefail
OUT="${OUT:?set OUT}"
here="$(dirname "${BASH_SOURCE[0]}")"
card="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)"
if [[ "$card" == *H200* ]]; then
  echo "== ${card}: the table (PENDING item 1)"
  # 540 s: 80 epochs took 442 s with start-up on the H200 (2026-12-04), before the held-out passes were added;
  # a pretraining cut after epoch 79 would resume from epoch 60. Seed 1 of optimized may then wait a call.
  OUT=$OUT VALIDATE=no BUDGET_S=540 bash "$here/capture_table.sh"
  OUT=$OUT KEEP_DONE=yes RUN_LIMIT_S=300 \
    RUNS="optimized:1 guide:1 baseline:1 optimized:2:ema_decay=0.99 guide:2:ema_decay=0.99 optimized:3:ema_decay=0.99" \
    END_S=$((590 - SECONDS)) STOP_AFTER_S=$((500 - SECONDS)) bash "$here/capture_seeds.sh"
else
  echo "== ${card:-no GPU named}: the 256-token exploration (PENDING item 2)"
  # 560 s: a 256-token epoch takes 4.87 s on an H100 and ~80 s go outside the epochs (2026-12-05)
  OUT=$OUT MAX_LEN=256 BUDGET_S=560 bash "$here/capture_table.sh"
  OUT=$OUT SET="max_len=256 ema_decay=0.99" KEEP_DONE=yes \
    RUNS="optimized:1 optimized:1:max_len=128 optimized:1:reinit_layers=4 optimized:2 optimized:2:max_len=128 optimized:2:reinit_layers=4 optimized:3 optimized:3:max_len=128" \
    END_S=$((590 - SECONDS)) STOP_AFTER_S=$((500 - SECONDS)) bash "$here/capture_seeds.sh"
fi
