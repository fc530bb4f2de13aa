"""train/seeds.py and `dgxperf runs seeds`: recipes compared over their seeds, on the H200's real runs.

The groups are the committed fine-tunes from encoder G (docs/benchmarks/2026-12-04-h200-encoder-g/): four
`optimized` seeds and three `guide` seeds, each run's own result.json. Expected figures were computed
independently with SciPy: ``ttest_ind(equal_var=False)`` gives Welch df 4.9649 and t 2.7281, and
``permutation_test`` over all 35 splits of |mean difference| gives p = 3/35."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from dgxperf.store import RunStore, default_store_path
from dgxperf.train.seeds import (
    MAX_SPLITS,
    SeedsError,
    check_same_split,
    compare_seed_groups,
    encoders,
    seed_run,
    t975,
)
from tests.test_cli import dgxperf, no_traceback
from tests.test_schemas import assert_valid

ROOT = Path(__file__).resolve().parents[2]
ENCODER_G = ROOT / "docs/benchmarks/2026-12-04-h200-encoder-g"
OPTIMIZED_G = [
    ENCODER_G / "validate/train-optimized/result.json",
    *(ENCODER_G / f"seeds/optimized-s{s}/result.json" for s in (1, 2, 3)),
]
GUIDE_G = [
    ENCODER_G / "validate/train-guide/result.json",
    *(ENCODER_G / f"seeds/guide-s{s}/result.json" for s in (1, 2)),
]


def results(paths: list[Path]) -> list[dict[str, Any]]:
    found = [p for p in paths if p.is_file()]
    assert found == paths, "the committed H200 results moved"
    return [json.loads(p.read_text()) for p in paths]


def accuracies(paths: list[Path]) -> list[float]:
    return [100 * r["test"]["accuracy"] for r in results(paths)]


def test_optimized_and_guide_seeds_from_encoder_g() -> None:
    compared = compare_seed_groups(accuracies(OPTIMIZED_G), accuracies(GUIDE_G))
    assert compared["a"]["runs"] == 4 and compared["b"]["runs"] == 3
    assert compared["a"]["mean"] == pytest.approx(86.4775, abs=1e-3)
    assert compared["b"]["mean"] == pytest.approx(85.9255, abs=1e-3)
    assert compared["difference"] == pytest.approx(0.5520, abs=1e-3)
    assert compared["welch_df"] == pytest.approx(4.9649, abs=1e-3)
    se = compared["difference"] / 2.7281  # Welch's t from SciPy
    low, high = compared["difference_ci95"]
    assert (high - low) / 2 == pytest.approx(2.777 * se, rel=1e-3)  # df 4.96 held down to 4
    assert low < 0 < high  # not told apart with these seeds, though every optimized run beat the guide mean
    assert compared["splits"] == math.comb(7, 4) == 35
    assert compared["p_value"] == pytest.approx(3 / 35)  # the observed split and two as wide or wider
    assert compared["smallest_possible_p"] == pytest.approx(1 / 35)


def test_two_seeds_a_side_can_never_be_significant() -> None:
    compared = compare_seed_groups([86.0, 86.1], [84.0, 84.1])  # far apart, each tight
    assert compared["splits"] == 6
    assert compared["p_value"] == compared["smallest_possible_p"] == pytest.approx(1 / 3)
    assert compared["difference_ci95"][0] > 0  # Welch's interval, with its assumptions, does separate them


def test_identical_runs_have_no_spread_and_an_exact_difference() -> None:
    compared = compare_seed_groups([85.0, 85.0], [84.5, 84.5, 84.5])
    assert compared["difference_ci95"] == [0.5, 0.5] and compared["welch_df"] is None
    assert compared["a"]["sd"] == 0


def test_a_group_of_one_is_refused() -> None:
    with pytest.raises(SeedsError, match="at least 2 runs"):
        compare_seed_groups([86.0], [85.0, 85.5])


def test_too_many_runs_to_enumerate_keep_welch_only() -> None:
    many = [80.0 + i / 10 for i in range(12)]
    assert math.comb(24, 12) > MAX_SPLITS
    compared = compare_seed_groups(many, [v + 1 for v in many])
    assert compared["p_value"] is None and compared["smallest_possible_p"] is None
    assert compared["difference"] == pytest.approx(-1.0)


def test_t_quantiles_are_never_narrower_than_the_true_ones() -> None:
    # Student's t, two-sided 95%, from SciPy's t.ppf(0.975, df)
    reference = {
        1: 12.7062,
        2: 4.3027,
        3.7: 2.8675,
        10: 2.2281,
        31: 2.0395,
        45: 2.0141,
        100: 1.9840,
        500: 1.9647,
    }
    for df, true in reference.items():
        assert true <= t975(df) < true + 0.35, df
    assert t975(4.95) == t975(4) == 2.777
    with pytest.raises(ValueError):
        t975(0.5)


def test_seed_run_reads_a_stored_train_result_and_refuses_others() -> None:
    result = results(OPTIMIZED_G[1:2])[0]
    run = seed_run(7, "train", result)
    assert run == {
        "run_id": 7,
        "recipe": "optimized",
        "seed": 1,
        "test_accuracy": result["test"]["accuracy"],
        "split_hash": result["data"]["encoded"]["split_hash"],
        "encoder": None,  # recorded before train results named their pretraining
    }
    with pytest.raises(SeedsError, match="is a `doctor` run"):
        seed_run(3, "doctor", {})
    with pytest.raises(SeedsError, match="no test accuracy"):
        seed_run(4, "train", {"test": None})


def with_encoder(result: dict[str, Any], sha256: str) -> dict[str, Any]:
    """SYNTHETIC edit of a real result: encoder G's runs predate ``init.pretrain``, so name one."""
    edited = json.loads(json.dumps(result))
    edited["init"]["pretrain"] = {"sha256": sha256, "settings": {"epochs": 80}, "final_loss": 1.72}
    return edited


def test_seed_run_names_the_encoder_it_was_fine_tuned_from() -> None:
    result = results(OPTIMIZED_G[:1])[0]
    run = seed_run(1, "train", with_encoder(result, "ab" * 32))
    assert run["encoder"] == "ababababab" + "ab"
    runs = [run, seed_run(2, "train", with_encoder(result, "cd" * 32)), seed_run(3, "train", result)]
    assert encoders(runs) == {"ab" * 6, "cd" * 6}  # the run without a name adds none
    assert seed_run(4, "train", {**result, "init": None})["encoder"] is None  # trained from scratch


def test_runs_on_different_splits_are_refused() -> None:
    runs = [{"run_id": 1, "split_hash": "aaaa" * 16}, {"run_id": 2, "split_hash": "bbbb" * 16}]
    with pytest.raises(SeedsError, match=r"different splits.*runs 1.*runs 2"):
        check_same_split(runs)
    check_same_split(runs[:1])


# -- the command ----------------------------------------------------------------------------------------------


def stored(home: Path, paths: list[Path], edit: Any = None) -> list[int]:
    with RunStore(default_store_path({"DGXPERF_HOME": str(home)})) as store:
        return [
            store.save(command="train", schema=r["schema"], status="ok", fingerprint={"hostname": "h200"},
                       result=edit(r) if edit else r, argv=["train"], tool_version=r["tool_version"])
            for r in results(paths)
        ]  # fmt: skip


def test_runs_seeds_shows_the_encoders_and_warns_when_they_differ(tmp_path: Path) -> None:
    def two_encoders(result: dict[str, Any]) -> dict[str, Any]:
        return with_encoder(result, ("aa" if result["recipe"] == "optimized" else "bb") * 32)

    stored(tmp_path, OPTIMIZED_G + GUIDE_G, edit=two_encoders)
    data = json.loads(dgxperf("runs", "seeds", "1-4", "5-7", "--json", home=tmp_path).stdout)
    assert_valid("seeds", data)
    assert {r["encoder"] for r in data["runs_a"]} == {"aa" * 6} and {
        r["encoder"] for r in data["runs_b"]
    } == {"bb" * 6}
    human = dgxperf("runs", "seeds", "1-4", "5-7", home=tmp_path).stdout
    assert "encoder" in human and "aaaaaaaaaaaa" in human
    assert "fine-tuned from 2 different encoders" in human
    one = tmp_path / "one"
    stored(one, OPTIMIZED_G + GUIDE_G, edit=lambda r: with_encoder(r, "aa" * 32))
    assert "different encoders" not in dgxperf("runs", "seeds", "1-4", "5-7", home=one).stdout


def test_runs_seeds_compares_the_stored_runs(tmp_path: Path) -> None:
    ids = stored(tmp_path, OPTIMIZED_G + GUIDE_G)
    assert ids == list(range(1, 8))
    result = dgxperf("runs", "seeds", "1-4", "5,6,7", "--json", home=tmp_path)
    no_traceback(result)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert_valid("seeds", data)
    assert [r["run_id"] for r in data["runs_a"]] == [1, 2, 3, 4]
    assert {r["recipe"] for r in data["runs_a"]} == {"optimized"} and {
        r["recipe"] for r in data["runs_b"]
    } == {"guide"}
    assert data["difference"] == pytest.approx(0.5520, abs=1e-3) and data["p_value"] == pytest.approx(3 / 35)
    human = dgxperf("runs", "seeds", "1-4", "5-7", home=tmp_path)
    assert human.returncode == 0
    assert "86.48 ± 0.30" in human.stdout and "85.93 ± 0.23" in human.stdout
    assert "+0.55 points" in human.stdout and "not told apart" in human.stdout
    assert "encoder" not in human.stdout  # none of these runs names its pretraining: no column, no warning


@pytest.fixture(scope="module")
def seven_runs_and_a_doctor(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding encoder G's seven runs (ids 1-7) and a `doctor` run (8), shared by the error cases, which only
    read it (the doctor run costs seconds: it imports PyTorch)."""
    home = tmp_path_factory.mktemp("seeds-store")
    stored(home, OPTIMIZED_G + GUIDE_G)
    assert dgxperf("doctor", home=home).returncode in (0, 1)  # run 8; 1: findings on this machine
    return home


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [
        ("1,x", "3", "run ids are numbers"),
        ("3-1", "4", "a range runs from low to high"),
        ("1,2", "2,3", "in both groups"),
        ("1,2", "3,99", "99"),
        ("1", "2,3", "at least 2 runs"),
        ("1,2", "3,8", "is a `doctor` run"),
    ],
)
def test_runs_seeds_errors_are_one_line(seven_runs_and_a_doctor: Path, a: str, b: str, message: str) -> None:
    result = dgxperf("runs", "seeds", a, b, home=seven_runs_and_a_doctor)
    no_traceback(result)
    assert result.returncode == 2 and message in result.stderr, result.stderr
