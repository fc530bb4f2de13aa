#!/usr/bin/env bash
# The next device call, whichever card comes (docs/benchmarks/PENDING.md's rule; calls naming nvidia-h200
# were given an H100 on 2026-12-05): PENDING item 1, one 160-epoch masked-LM encoder and the three recipes
# fine-tuned from it (optimized seeds 1-3, guide seeds 1-2, baseline seed 1). On an H200 that is also issue 4's
# table (equal epochs, one encoder); on any card it asks whether pretraining twice as long lifts every recipe
# to 86%. The same command every call, carrying .data:
#   OUT=$OUT bash scripts/h200/capture_next.sh
# Each call keeps what earlier calls on the still-warm machine finished (KEEP_DONE) and resumes a cut
# pretraining from its last checkpoint (every 20 epochs), so the command is repeated until its log says every
# run is finished. Results as capture_table.sh's and capture_seeds.sh's: log-table.txt, pretrain.json,
# log-seeds.txt, monitor-seeds.{jsonl,log} and seeds.tgz.
set -uo pipefail
OUT="${OUT:?set OUT}"
here="$(dirname "${BASH_SOURCE[0]}")"
card="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)"
echo "== ${card:-no GPU named}: a 160-epoch encoder and the three recipes (PENDING item 1)"
# 580 s: on an H100 (4.08 s an epoch, ~75 s to start and compile) the first call then passes the epoch-120
# checkpoint; a later call resumes from it and still has ~270 s for fine-tunes.
OUT=$OUT VALIDATE=no PRETRAIN_EPOCHS=160 BUDGET_S=580 bash "$here/capture_table.sh"
OUT=$OUT KEEP_DONE=yes RUNS="optimized:1 guide:1 baseline:1 optimized:2 guide:2 optimized:3" RUN_LIMIT_S=300 \
  END_S=$((590 - SECONDS)) STOP_AFTER_S=$((500 - SECONDS)) bash "$here/capture_seeds.sh"
