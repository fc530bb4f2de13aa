"""The JSON Schemas of src/dgxperf/schemas/ against what dgxperf really emitted.

Every result committed in the repository (tests/data, docs/benchmarks) whose top-level ``schema`` names a
result type is validated against that type's schema; results that need a computer to produce but no GPU
(advice on the H200 recordings, memory and MIG plans) are produced here and validated too. Each schema
also gets a negative test, so that a schema that accepts anything fails here.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer.testing import CliRunner

from dgxperf.advise.engine import run_advise
from dgxperf.cli import SCHEMA_FILES, app
from dgxperf.monitor.sources import read_recording

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ROOT / "src" / "dgxperf" / "schemas"
H200 = ROOT / "tests" / "data" / "h200"

# The `schema` value of each result type -> the name `dgxperf schema NAME` takes.
KINDS = {
    "dgxperf.doctor/1": "doctor",
    "dgxperf.snapshot/1": "snapshot",
    "dgxperf.bench/1": "bench",
    "dgxperf.train/1": "train",
    "dgxperf.advice/1": "advice",
    "dgxperf.validate/1": "validate",
    "dgxperf.plan.memory/1": "plan-memory",
    "dgxperf.plan.mig/1": "plan-mig",
    "dgxperf.pretrain/1": "pretrain",
    "dgxperf.seeds/1": "seeds",
}

runner = CliRunner()


def schema(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SCHEMAS / SCHEMA_FILES[name]).read_text())
    return data


def validator(name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(schema(name), format_checker=jsonschema.FormatChecker())


def errors(name: str, data: Any) -> list[str]:
    return [
        f"{'/'.join(str(p) for p in e.absolute_path)}: {e.message}"[:300]
        for e in validator(name).iter_errors(data)
    ]


def assert_valid(name: str, data: Any) -> None:
    problems = errors(name, data)
    assert not problems, "\n".join(problems[:10])


def assert_invalid(name: str, data: Any) -> None:
    assert errors(name, data), f"the {name} schema accepted a broken document"


def load(path: Path) -> Any:
    return json.loads(path.read_text())


# -- the schema files themselves ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SCHEMA_FILES))
def test_each_schema_is_a_valid_json_schema(name: str) -> None:
    data = schema(name)
    jsonschema.Draft202012Validator.check_schema(data)
    assert data["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert data["$id"] == f"https://dgxperf.dev/schemas/{SCHEMA_FILES[name]}"
    assert data.get("title") and data.get("description")
    const = data["properties"]["schema"].get("const")
    if name != "run":  # a run-store entry names its result's schema: any
        assert KINDS[const] == name


def test_every_schema_file_is_registered_and_every_result_type_has_one() -> None:
    assert sorted(SCHEMA_FILES.values()) == sorted(p.name for p in SCHEMAS.glob("*.json"))
    assert set(KINDS.values()) <= set(SCHEMA_FILES)
    # every result type the code stamps on a --json result has a schema
    emitted = set()
    for module in (ROOT / "src" / "dgxperf").rglob("*.py"):
        emitted |= set(re.findall(r'"(dgxperf\.[a-z.]+/\d+)"', module.read_text()))
    # not --json results: monitor recordings (JSON Lines), caches, checkpoints and test predictions of
    # `train`, and the weights file of a `pretrain` folder
    internal = {
        "dgxperf.recording/1",
        "dgxperf.encoder/1",
        "dgxperf.tokenizer/1",
        "dgxperf.checkpoint/1",
        "dgxperf.train.task/1",
        "dgxperf.train.encoded/1",
        "dgxperf.train.sampler/1",
        "dgxperf.train.predictions/1",
    }
    assert emitted - internal == set(KINDS)


@pytest.mark.parametrize("name", sorted(SCHEMA_FILES))
def test_dgxperf_schema_prints_each(name: str) -> None:
    result = runner.invoke(app, ["schema", name])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == schema(name)


def test_an_unknown_schema_exits_2_and_lists_every_name() -> None:
    result = runner.invoke(app, ["schema", "bogus"], env={"COLUMNS": "300"})
    assert result.exit_code == 2
    message = " ".join(result.stderr.split())
    assert "unknown schema 'bogus'" in message
    assert f"choose from {', '.join(SCHEMA_FILES)}" in message


def test_the_schema_command_help_names_every_schema() -> None:
    result = runner.invoke(app, ["schema", "--help"], env={"COLUMNS": "300"})
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    assert all(name in text for name in SCHEMA_FILES)


# -- every committed result ----------------------------------------------------------------------------------


def committed_results() -> Iterator[tuple[Path, str]]:
    """(file, schema name) of every committed JSON document whose top-level `schema` is a result type."""
    for top in ("tests/data", "docs"):
        for path in sorted((ROOT / top).rglob("*.json")):
            try:
                data = load(path)
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
            if isinstance(data, dict) and data.get("schema") in KINDS:
                yield path, KINDS[data["schema"]]


COMMITTED = list(committed_results())
PRETRAIN = "docs/benchmarks/2026-12-03-h200-pretrain"
# `dgxperf pretrain` on the H200, and `dgxperf train --set init_from=` the folder it wrote
PRETRAIN_RESULTS = [
    f"{PRETRAIN}/pretrain80-guide/pretrain.json",
    f"{PRETRAIN}/pretrain40-optimized/pretrain.json",
]
PRETRAINED_TRAIN_RESULTS = [
    f"{PRETRAIN}/pretrain80-guide/train-guide.json",
    f"{PRETRAIN}/pretrain40-optimized/train-optimized.json",
]


def test_the_committed_results_cover_every_kind_they_hold() -> None:
    found = {name for _, name in COMMITTED}
    # what the repository holds today; a new kind of committed result is picked up by the test below
    assert {"doctor", "snapshot", "bench", "train", "validate", "pretrain"} <= found
    names = {p.relative_to(ROOT).as_posix() for p, _ in COMMITTED}
    assert {
        "tests/data/h200/bench/bench-all-quick.json",
        "tests/data/h200/bench/bench-nccl.json",
        "tests/data/h200/validate/validate-large-1epoch-ablation.json",
        "docs/benchmarks/2026-12-03-h200-validate/validate.json",
        "docs/benchmarks/2026-12-03-h200-train-synthetic/synthetic-batch_size-512_compile_scope-model.json",
        *PRETRAIN_RESULTS,
        *PRETRAINED_TRAIN_RESULTS,
    } <= names


@pytest.mark.parametrize(
    ("path", "name"), COMMITTED, ids=[p.relative_to(ROOT).as_posix() for p, _ in COMMITTED]
)
def test_committed_result_validates(path: Path, name: str) -> None:
    assert_valid(name, load(path))


@pytest.mark.parametrize("path", PRETRAIN_RESULTS)
def test_the_h200_pretrain_results_validate(path: str) -> None:
    result = load(ROOT / path)
    assert result["schema"] == "dgxperf.pretrain/1" and result["device"] == "NVIDIA H200"
    assert len(result["epochs"]) == result["settings"]["epochs"]
    assert_valid("pretrain", result)


@pytest.mark.parametrize("path", PRETRAINED_TRAIN_RESULTS)
def test_the_h200_runs_fine_tuned_from_a_pretrained_folder_validate(path: str) -> None:
    result = load(ROOT / path)
    assert result["config"]["init_from"] and result["init"]["loaded_tensors"] > 0
    assert result["init"]["init_from"] == result["config"]["init_from"]
    assert_valid("train", result)
    assert_valid("train", result | {"init": None})  # from scratch, or resumed
    assert_invalid("train", result | {"init": {"init_from": "x", "loaded_tensors": 0}})
    assert_invalid("train", without(result, "init", "loaded_tensors"))


def test_the_memory_measurement_rows_are_train_results() -> None:
    """tests/data/h200/plan/memory-measurements.json holds `dgxperf train --json` outputs as table rows:
    scripts/h200/measure_memory.sh's label was added as `name` and `out_dir` (a path on the lent machine)
    left out. Apart from those two keys every row is a train result."""
    rows = load(H200 / "plan" / "memory-measurements.json")["rows"]
    assert len(rows) >= 10
    for row in rows:
        assert "name" in row and "out_dir" not in row
        result = {k: v for k, v in row.items() if k != "name"} | {"out_dir": "(left out of the table)"}
        assert_valid("train", result)
        assert_invalid("train", row)  # as stored, `name` is no train key and out_dir is missing


# -- results produced here -----------------------------------------------------------------------------------


RECORDINGS = sorted((H200 / "monitor").glob("*.jsonl"))


def advice_for(recording: Path) -> dict[str, Any]:
    header, samples, _warnings = read_recording(recording)
    result: dict[str, Any] = run_advise(samples, header).to_json()
    return result


@pytest.mark.parametrize("recording", RECORDINGS, ids=[p.stem for p in RECORDINGS])
def test_advice_on_each_h200_recording_validates(recording: Path) -> None:
    assert_valid("advice", advice_for(recording))


def test_advice_with_sliding_windows_and_suggestions_validates() -> None:
    advice = advice_for(H200 / "monitor" / "train-baseline.jsonl")
    assert advice["windows"] > 0 and advice["suggestions"]
    assert_valid("advice", advice)
    short = advice_for(H200 / "monitor" / "gemm.jsonl")
    assert short["windows"] == 0 and short["suggestions"][0]["windows"] is None


def test_advice_naming_a_host_that_slowed_validates() -> None:
    """launch.host_slowed's evidence carries a pid, a time and steal figures that may be null."""
    advice = advice_for(ROOT / "tests" / "data" / "h100" / "monitor" / "guide-host-slowed.jsonl")
    assert "launch.host_slowed" in {s["rule"] for s in advice["suggestions"]}
    assert_valid("advice", advice)


def test_advice_on_nothing_validates() -> None:
    assert_valid("advice", run_advise([], None).to_json())


def cli_json(*args: str) -> dict[str, Any]:
    result = runner.invoke(app, [*args, "--json"], env={"COLUMNS": "200"})
    assert result.exit_code in (0, 1), result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


PLAN_MEMORY_CASES = [
    [],
    ["--preset", "base", "--eval-batch", "64", "--checkpointing"],
    ["--params", "350e6", "--sharding", "zero3", "--gpus", "8", "--offload"],
    ["--preset", "tiny", "--precision", "fp32", "--optimizer", "adafactor", "--attention", "math"],
    ["--precision", "bf16", "--sharding", "zero2", "--gpus", "4", "--grad-accum", "4", "--dropout", "0"],
    ["--layers", "4", "--hidden", "256", "--optimizer", "lamb", "--padding-mask", "--margin", "0.2"],
]


@pytest.mark.parametrize(
    "args", PLAN_MEMORY_CASES, ids=[" ".join(a) or "defaults" for a in PLAN_MEMORY_CASES]
)
def test_plan_memory_json_validates(args: list[str]) -> None:
    assert_valid("plan-memory", cli_json("plan", "memory", *args))


HOST = ["--host-cpus", "64", "--host-memory-gb", "512"]
PLAN_MIG_CASES = [
    ["--gpu-model", "h100", "3g + 2x1g, inference 3GB x1"],
    ["--gpu-model", "a100-80gb", "inference 3GB x1, training 10GB x6"],  # not valid: alternatives
    ["--gpu-model", "h200", "--gpus", "2", "training 60GB x3, serving 20GB x2"],
    ["--gpu-model", "a100-40gb", "--context-gb", "0", "7x1g.5gb"],
    ["--gpu-model", "h100", "video 1g+me x1, batch 40SM x1"],
    ["--gpu-model", "a100-40gb", "huge 200GB x1"],  # no profile meets the need
]


@pytest.mark.parametrize("args", PLAN_MIG_CASES, ids=[a[-1] for a in PLAN_MIG_CASES])
def test_plan_mig_json_validates(args: list[str]) -> None:
    plan = cli_json("plan", "mig", *args, *HOST)
    assert_valid("plan-mig", plan)


def test_plan_mig_cases_include_valid_and_invalid_layouts() -> None:
    plans = [cli_json("plan", "mig", *args, *HOST) for args in PLAN_MIG_CASES[:2]]
    assert plans[0]["valid"] and plans[0]["systemd"] and plans[0]["commands"]
    assert not plans[1]["valid"] and plans[1]["alternatives"]


# -- each schema rejects what the code never emits -----------------------------------------------------------

TRAIN = ROOT / "docs" / "benchmarks" / "2026-12-03-h200-train-synthetic"
TRAIN_RESULT = TRAIN / "synthetic-batch_size-512_compile_scope-model.json"
VALIDATE_ABLATION = H200 / "validate" / "validate-large-1epoch-ablation.json"


def without(data: dict[str, Any], *path: str | int) -> dict[str, Any]:
    """A deep copy of ``data`` with the key at ``path`` removed."""
    out = copy.deepcopy(data)
    node: Any = out
    for step in path[:-1]:
        node = node[step]
    del node[path[-1]]
    return out


def test_train_schema_rejects_broken_results() -> None:
    result = load(TRAIN_RESULT)
    assert "shape_warmup" not in result  # written before the field existed: it is optional
    for key in ("summary", "epochs", "out_dir", "config", "world"):
        assert_invalid("train", without(result, key))
    assert_invalid("train", without(result, "summary", "test_accuracy"))
    assert_invalid("train", without(result, "summary", "steady_windows"))  # steady_* come together
    assert_invalid("train", without(result, "epochs", 0, "resumed_mid_epoch"))
    assert_invalid("train", result | {"unknown_key": 1})
    warmed = result | {"shape_warmup": {"shapes": [[512, 128, True], [67, 128, False]], "seconds": 4.2}}
    assert_valid("train", warmed)
    assert_valid("train", result | {"shape_warmup": None})
    assert_invalid("train", result | {"shape_warmup": {"shapes": [[512, 128]], "seconds": 4.2}})
    assert_invalid("train", result | {"shape_warmup": {"shapes": [[512, 128, "yes"]], "seconds": 4.2}})
    assert_invalid("train", result | {"shape_warmup": {"shapes": []}})
    # the pace a run's logged samples/s fell to part-way (guide-s1 on the 2026-12-07 H100 host)
    pace = {"step": 320, "samples_per_s_before": 521.3, "samples_per_s_after": 314.1, "drop": 0.397,
            "windows_before": 15, "windows_after": 19}  # fmt: skip
    assert_valid("train", result | {"pace_change": pace})
    assert_valid("train", result | {"pace_change": None})
    assert_invalid("train", result | {"pace_change": without(pace, "step")})
    assert_invalid("train", result | {"pace_change": pace | {"drop": 1.5}})


def test_pretrain_schema_rejects_broken_results() -> None:
    result = load(ROOT / PRETRAIN_RESULTS[1])
    for key in ("schema", "settings", "model", "data", "epochs", "final_loss", "tokens_per_s_steady"):
        assert_invalid("pretrain", without(result, key))
    assert_invalid("pretrain", without(result, "settings", "mask_prob"))
    assert_invalid("pretrain", without(result, "model", "vocab_size"))
    assert_invalid("pretrain", without(result, "data", "encoded"))
    assert_invalid("pretrain", without(result, "epochs", 0, "loss"))
    assert_invalid("pretrain", result | {"unknown_key": 1})
    assert_invalid("pretrain", result | {"schema": "dgxperf.train/1"})
    assert_invalid("pretrain", result | {"epochs": []})
    assert_invalid("pretrain", result | {"steps_per_epoch": 0})
    bad = copy.deepcopy(result)
    bad["settings"]["mask_prob"] = 1.0  # PretrainSettings.validate refuses it
    assert_invalid("pretrain", bad)
    bad = copy.deepcopy(result)
    bad["epochs"][0]["type"] = "epoch"  # a train epoch record is not a pretrain one
    assert_invalid("pretrain", bad)
    bad = copy.deepcopy(result)
    bad["epochs"][0]["dev_accuracy"] = 0.5
    assert_invalid("pretrain", bad)
    subset = {"train": 300, "dev": 64, "test": 64}
    assert_valid("pretrain", result | {"data": result["data"] | {"subset": subset}})


def test_validate_schema_rejects_broken_results() -> None:
    result = load(VALIDATE_ABLATION)
    for key in ("plan", "phases", "recipes", "ablation", "complete"):
        assert_invalid("validate", without(result, key))
    assert_invalid("validate", without(result, "total_seconds"))  # calls and total_seconds come together
    assert_invalid("validate", without(result, "phases", 0, "state"))
    assert_invalid("validate", without(result, "phases", 5))  # every phase but pretrain is always there
    pretrained = copy.deepcopy(result)
    pretrain_phase = {"name": "pretrain", "state": "ok", "seconds": 367.0, "note": "80 epochs", "error": None,
                      "what": "masked-LM self-pretraining"}  # fmt: skip
    pretrained["phases"].insert(2, pretrain_phase)
    pretrained["plan"] |= {"pretrain_epochs": 80, "init_from": None}
    pretrained["pretrain"] = {
        "folder": "pretrain", "epochs": 80, "loss_first": 6.91, "loss_last": 1.72, "tokens_per_epoch": 835584,
        "tokens_per_s_steady": 217500.0, "total_seconds": 367.0,
    }  # fmt: skip
    assert_valid("validate", pretrained)
    assert_invalid("validate", without(pretrained, "phases", 3))  # seven phases, but no train
    assert_invalid("validate", without(pretrained, "pretrain", "epochs"))
    assert_invalid("validate", pretrained | {"plan": pretrained["plan"] | {"pretrain_epochs": 0}})
    assert_invalid("validate", without(result, "recipes", "guide", "summary", "samples_per_s"))
    assert_invalid("validate", without(result, "recipes", "guide", "summary", "steady_mfu"))
    assert_invalid("validate", without(result, "ablation", 1, "vs_reference"))
    assert_invalid("validate", without(result, "ablation", 1, "samples_per_s"))
    failed_row = {k: v for k, v in result["ablation"][1].items() if k in ("name", "recipe", "what", "fields")}
    failed = copy.deepcopy(result)
    failed["ablation"][1] = failed_row | {"error": "exited with 1", "vs_reference": None}
    assert_valid("validate", failed)
    failed["ablation"][1]["samples_per_s"] = 1.0  # an error row has no figures
    assert_invalid("validate", failed)
    broken = copy.deepcopy(result)
    broken["recipes"]["guide"] = {"error": "train guide exited with 1"}
    assert_valid("validate", broken)
    broken["recipes"]["fast"] = broken["recipes"]["optimized"]
    assert_invalid("validate", broken)
    assert_valid("validate", result | {"report_md": "r/report.md", "report_html": "r/report.html"})
    assert_invalid("validate", result | {"report_md": "r/report.md"})


def test_advice_schema_rejects_broken_results() -> None:
    advice = advice_for(H200 / "monitor" / "starved-swing.jsonl")
    assert advice["suggestions"]
    for key in ("range", "suggestions", "rules", "not_evaluated"):
        assert_invalid("advice", without(advice, key))
    assert_invalid("advice", without(advice, "suggestions", 0, "evidence"))
    assert_invalid("advice", without(advice, "suggestions", 0, "evidence", "metrics"))
    bad = copy.deepcopy(advice)
    bad["suggestions"][0]["severity"] = "urgent"
    assert_invalid("advice", bad)
    bad = copy.deepcopy(advice)
    bad["rules"][0]["evaluated"] = False  # a rule that did not judge says why
    assert_invalid("advice", bad)


def test_bench_schema_rejects_broken_results() -> None:
    result = load(H200 / "bench" / "bench-nccl.json")
    for key in ("device", "measurements", "summary", "run_id", "nccl"):
        assert_invalid("bench", without(result, key))
    assert_invalid("bench", without(result, "measurements", 0, "timing", "median_s"))
    assert_invalid(
        "bench", without(load(H200 / "bench" / "bench-gemm.json"), "summary", "gemm", "bf16", "tflops")
    )
    memory = load(H200 / "bench" / "bench-memory.json")
    assert_invalid("bench", memory | {"nccl": result["nccl"]})  # only nccl and all carry it
    assert_invalid("bench", memory | {"suite": "everything"})


def test_plan_memory_schema_rejects_broken_results() -> None:
    plan = cli_json("plan", "memory")
    for key in ("peak_bytes", "components", "phases", "inputs", "gpus", "margin"):
        assert_invalid("plan-memory", without(plan, key))
    assert_invalid("plan-memory", plan | {"peak_phase": "sometime"})
    assert_invalid("plan-memory", without(plan, "phases", "forward", "total"))
    assert_invalid("plan-memory", without(plan, "gpus", 0, "max_micro_batch"))


def test_plan_mig_schema_rejects_broken_results() -> None:
    valid = cli_json("plan", "mig", *PLAN_MIG_CASES[0], *HOST)
    for key in ("tenants", "layout", "summary", "commands", "host", "systemd"):
        assert_invalid("plan-mig", without(valid, key))
    assert_invalid("plan-mig", without(valid, "layout", 0, "map"))
    assert_invalid("plan-mig", without(valid, "tenants", 0, "instances", 0, "start"))
    assert_invalid("plan-mig", valid | {"valid": False})  # a plan that is not valid prints no commands
