#!/usr/bin/env bash
# The lines every capture log opens with: the card, torch, the host's CPU and what one kernel launch costs
# it (`dgxperf bench launch`). guide's step is host bound, so the speed ratio follows the host's launch cost.
#   bash scripts/h200/host_header.sh >> "$log"
set -uo pipefail
# shellcheck source=scripts/h200/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader)"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
echo "== host: $(grep -m 1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $(nproc) cores"
python3 -m dgxperf bench launch --json 2>&1 | python3 -c '
import json, sys
text = sys.stdin.read()
try:
    launch = json.loads(text)["summary"]["launch"]
except (ValueError, KeyError):
    print("== bench launch failed:", (text.strip().splitlines() or ["no output"])[-1])
else:
    print("== bench launch:", json.dumps(launch))'
