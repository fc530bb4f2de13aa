"""Issue 4's accuracy tally, recomputed from the committed H200 results rather than copied by hand.

README.md and docs/benchmarks/ quote the mean test accuracy of each recipe over every 3-epoch fine-tune
from a reviews-only, 80-epoch masked-LM encoder at the recipe's own settings. The runs behind it are listed
here, file by file, each tagged with its encoder (A-D, G, H, I: which pretraining a run came from is
told by its folder; results since 2026-12-04 also carry ``init.pretrain``). Every listed run is checked
to be such a fine-tune, so the list cannot quietly take in a variant (another batch, lr or epoch count).
"""

from __future__ import annotations

import functools
import gzip
import json
import math
import statistics
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "docs" / "benchmarks"
OWN_SETTINGS = {"optimized": (128, 1e-4), "guide": (64, 5e-5), "baseline": (64, 5e-5)}

# (encoder, file, recipe inside a validate.json or None for a train result)
RUNS: list[tuple[str, str, str | None]] = [
    ("A", "2026-12-03-h200-pretrain/pretrain80-guide/train-guide.json", None),
    ("B", "2026-12-03-h200-pretrain/pretrain80-optimized/train-optimized.json", None),
    ("C", "2026-12-04-h200-validate-table/encoder-C/train-optimized.json", None),
    ("D", "2026-12-04-h200-validate-table/encoder-D/validate.json", "optimized"),
    ("D", "2026-12-04-h200-validate-table/encoder-D/validate.json", "guide"),
    *(
        ("G", f"2026-12-04-h200-encoder-g/{run}/result.json", None)
        for run in (
            "validate/train-optimized",
            "seeds/optimized-s1",
            "seeds/optimized-s2",
            "seeds/optimized-s3",
            "validate/train-guide",
            "seeds/guide-s1",
            "seeds/guide-s2",
            "validate/train-baseline",
            "seeds/baseline-s1",
        )
    ),
    *(
        ("H", f"2026-12-04-h200-encoder-h/{run}/result.json", None)
        for run in (
            "validate/train-optimized",
            "seeds/optimized-s1",
            "seeds/optimized-s2",
            "seeds/guide-s1",
            "seeds/guide-s2",
            "seeds/baseline-s1",
        )
    ),
    ("I", "2026-12-04-h200-encoder-i/validate/train-optimized/result.json", None),
    ("I", "2026-12-04-h200-encoder-i/validate/train-guide/result.json", None),
]


def fine_tune(encoder: str, path: str, recipe: str | None) -> dict[str, Any]:
    data = json.loads((BENCH / path).read_text())
    if recipe is not None:  # one recipe of a validate run
        entry = data["recipes"][recipe]
        accuracy, config = entry["summary"]["test_accuracy"], entry["config"]
        batch, lr = entry["global_batch"], entry["lr"]
    else:
        recipe, accuracy, config = data["recipe"], data["test"]["accuracy"], data["config"]
        batch, lr = data["global_batch"], data["lr"]
    return {"encoder": encoder, "path": path, "recipe": recipe, "accuracy": 100 * accuracy,
            "epochs": config["epochs"], "init_from": config["init_from"], "batch": batch, "lr": lr,
            "task": config["task"], "seed": config["seed"]}  # fmt: skip


@pytest.fixture(scope="module")
def runs() -> list[dict[str, Any]]:
    return [fine_tune(*run) for run in RUNS]


def tally(runs: list[dict[str, Any]]) -> dict[str, tuple[int, float, int]]:
    """recipe -> (runs, mean test accuracy rounded to 0.01, runs at or above 86%)."""
    out = {}
    for recipe in OWN_SETTINGS:
        values = [r["accuracy"] for r in runs if r["recipe"] == recipe]
        out[recipe] = (len(values), round(statistics.fmean(values), 2), sum(v >= 86 for v in values))
    return out


def test_every_listed_run_is_a_three_epoch_fine_tune_at_its_recipes_own_settings(
    runs: list[dict[str, Any]],
) -> None:
    for run in runs:
        where = run["path"]
        assert run["task"] == "chnsenticorp" and run["epochs"] == 3 and run["init_from"], where
        assert (run["batch"], run["lr"]) == pytest.approx(OWN_SETTINGS[run["recipe"]]), where
    # no run twice: one (encoder, recipe, seed) each
    keys = [(r["encoder"], r["recipe"], r["seed"]) for r in runs]
    assert len(keys) == len(set(keys))


def test_the_tally_the_docs_quote(runs: list[dict[str, Any]]) -> None:
    """README.md, PENDING.md and 2026-12-04-h200-encoder-i/README.md: 22 fine-tunes from 7 encoders."""
    assert len(runs) == 22 and len({r["encoder"] for r in runs}) == 7
    assert tally(runs) == {"optimized": (11, 85.82, 7), "guide": (8, 85.64, 2), "baseline": (3, 85.41, 0)}


def test_the_tally_before_encoder_i(runs: list[dict[str, Any]]) -> None:
    """The figures quoted before encoder I (encoder H's README, the README before 2026-12-04 17:00)."""
    earlier = [r for r in runs if r["encoder"] != "I"]
    assert len(earlier) == 20 and len({r["encoder"] for r in earlier}) == 6
    assert tally(earlier) == {"optimized": (10, 85.85, 7), "guide": (7, 85.71, 2), "baseline": (3, 85.41, 0)}


# Encoder J (2026-12-04-h200-encoder-j): span-masked (pretrain --mask-span 10), so kept out of the tally of
# single-character encoders. Folder -> test accuracy as its README quotes it.
ENCODER_J = "2026-12-04-h200-encoder-j"
J_RUNS = {
    "validate/train-optimized": 85.71,
    "seeds/optimized-s1": 85.77,
    "seeds/optimized-s2": 85.94,
    "seeds/guide-s1": 86.18,
    "seeds/optimized-s1-batch_size256-lr_scalingsqrt": 85.43,
    "seeds/optimized-s2-batch_size256-lr_scalingsqrt": 85.43,
    "seeds/optimized-s3-batch_size256-lr_scalingsqrt": 85.43,
    "seeds/guide-s1-lr_layer_decay0.9": 85.43,
    "seeds/guide-s2-lr_layer_decay0.9": 85.14,
    "seeds/optimized-s1-lr_layer_decay0.9": 85.60,
    "seeds/optimized-s2-lr_layer_decay0.9": 84.62,
}


def test_encoder_j_runs_all_came_from_one_span_masked_pretraining() -> None:
    pretrain = json.loads((BENCH / ENCODER_J / "pretrain.json").read_text())
    assert pretrain["settings"]["mask_span"] == 10
    identities = set()
    for folder, quoted in J_RUNS.items():
        result = json.loads((BENCH / ENCODER_J / folder / "result.json").read_text())
        identity = result["init"]["pretrain"]
        assert identity["settings"] == pretrain["settings"], folder
        assert identity["final_loss"] == pretrain["final_loss"], folder
        identities.add(identity["sha256"])
        assert round(100 * result["test"]["accuracy"], 2) == quoted, folder
        assert result["config"]["epochs"] == 3, folder
    assert len(identities) == 1


def test_encoder_j_figures_the_readme_quotes() -> None:
    def results(*folders: str) -> list[dict[str, Any]]:
        return [json.loads((BENCH / ENCODER_J / f / "result.json").read_text()) for f in folders]

    def mean_accuracy(runs: list[dict[str, Any]]) -> float:
        return round(statistics.fmean(100 * r["test"]["accuracy"] for r in runs), 2)

    own = results("validate/train-optimized", "seeds/optimized-s1", "seeds/optimized-s2")
    assert all((r["global_batch"], r["lr"]) == pytest.approx(OWN_SETTINGS["optimized"]) for r in own)
    wide = results(*(f for f in J_RUNS if "batch_size256" in f))
    assert all((r["global_batch"], r["lr"], r["config"]["lr_scaling"]) == (256, pytest.approx(1e-4), "sqrt")
               for r in wide)  # fmt: skip
    assert mean_accuracy(own) == 85.81
    assert round(mean_accuracy(wide) - statistics.fmean(100 * r["test"]["accuracy"] for r in own), 2) == -0.38
    decayed = results(*(f for f in J_RUNS if "lr_layer_decay" in f))
    assert all(r["config"]["lr_layer_decay"] == 0.9 for r in decayed)
    plain = [*own[1:], *results("seeds/guide-s1")]
    assert (mean_accuracy(decayed), mean_accuracy(plain)) == (85.20, 85.96)


# Encoders K and L (2026-12-04-h200-encoder-k): two pretrainings with one setting, 40% of the characters
# masked (pretrain --mask-prob 0.4), the same seed; kept out of the single-character, 15% tally.
# (encoder folder, run folder) -> (recipe, test accuracy as the README quotes it).
ENCODER_KL = "2026-12-04-h200-encoder-k"
KL_RUNS = {
    ("encoder-k", "validate/train/optimized"): ("optimized", 86.52),
    ("encoder-l", "seeds/guide-s1"): ("guide", 85.02),
    ("encoder-l", "seeds/optimized-s1"): ("optimized", 85.66),
    ("encoder-l", "seeds/optimized-s2"): ("optimized", 85.48),
}


def test_encoders_k_and_l_share_a_forty_percent_setting_but_not_weights() -> None:
    identities: dict[str, set[str]] = {"encoder-k": set(), "encoder-l": set()}
    for (encoder, folder), (recipe, quoted) in KL_RUNS.items():
        pretrain = json.loads((BENCH / ENCODER_KL / encoder / "pretrain.json").read_text())
        assert pretrain["settings"]["mask_prob"] == 0.4 and pretrain["settings"]["mask_span"] == 1
        result = json.loads((BENCH / ENCODER_KL / encoder / folder / "result.json").read_text())
        identity = result["init"]["pretrain"]
        assert (
            identity["settings"] == pretrain["settings"] and identity["final_loss"] == pretrain["final_loss"]
        )
        identities[encoder].add(identity["sha256"])
        assert result["recipe"] == recipe and round(100 * result["test"]["accuracy"], 2) == quoted, folder
        assert (result["config"]["epochs"], result["global_batch"]) == (3, OWN_SETTINGS[recipe][0]), folder
        assert result["lr"] == pytest.approx(OWN_SETTINGS[recipe][1]), folder
    # one encoder each; the same seed and settings did not give the same weights (GPU nondeterminism)
    assert all(len(found) == 1 for found in identities.values())
    assert identities["encoder-k"] != identities["encoder-l"]
    optimized = [quoted for recipe, quoted in KL_RUNS.values() if recipe == "optimized"]
    assert round(statistics.fmean(optimized), 2) == 85.89  # the tally's single-character mean: 85.82


# Encoder M (2026-12-05-h100-pooling-smoothing-pairs): pretrained as the tally's encoders are (reviews only, 80
# epochs, single characters at 15%), but on an H100, so its runs extend the tally rather than enter the H200 list.
# Run folder -> test accuracy as its README quotes it; the variants are paired with the default of their seed.
ENCODER_M = "2026-12-05-h100-pooling-smoothing-pairs"
M_DEFAULT_QUOTED = (86.23, 85.71, 86.06, 86.41, 86.06, 84.33, 85.89, 84.91)  # seeds 1-8
M_DEFAULTS = {f"optimized-s{seed}": quoted for seed, quoted in enumerate(M_DEFAULT_QUOTED, start=1)}
M_GUIDE = {"guide-s1": 85.31}


@functools.cache  # every test reads the same few files
def encoder_m_result(folder: str) -> dict[str, Any]:
    return json.loads((BENCH / ENCODER_M / folder / "result.json").read_text())


def encoder_m_accuracy(folder: str) -> float:
    return 100 * encoder_m_result(folder)["test"]["accuracy"]


def tally_pretraining(encoder_folder: str) -> dict[str, Any]:
    """The folder's pretrain.json, checked to be pretrained as the tally's encoders are: 80 masked-LM
    epochs of single characters at 15%, on the reviews alone."""
    pretrain: dict[str, Any] = json.loads((BENCH / encoder_folder / "pretrain.json").read_text())
    settings = pretrain["settings"]
    assert (settings["epochs"], settings["mask_prob"], settings["mask_span"]) == (80, 0.15, 1)
    assert settings["extra_text"] is None and settings["objective"] == "mlm"
    return pretrain


def test_encoder_m_runs_are_tally_fine_tunes_from_one_eighty_epoch_single_character_encoder() -> None:
    pretrain = tally_pretraining(ENCODER_M)
    settings = pretrain["settings"]
    identities = set()
    for folder, quoted in {**M_DEFAULTS, **M_GUIDE}.items():
        result = encoder_m_result(folder)
        identity = result["init"]["pretrain"]
        assert identity["settings"] == settings and identity["final_loss"] == pretrain["final_loss"], folder
        identities.add(identity["sha256"])
        recipe, config = result["recipe"], result["config"]
        assert (config["epochs"], config["task"], config["pooling"], config["label_smoothing"]) == (
            3, "chnsenticorp", "cls", 0.0), folder  # fmt: skip
        assert (result["global_batch"], result["lr"]) == pytest.approx(OWN_SETTINGS[recipe]), folder
        assert round(100 * result["test"]["accuracy"], 2) == quoted, folder
    assert len(identities) == 1


def test_the_tally_with_encoder_m(runs: list[dict[str, Any]]) -> None:
    """The README and encoder M's README: the H200 tally with M's nine default runs."""
    extended = [*runs, *({"recipe": encoder_m_result(f)["recipe"], "accuracy": encoder_m_accuracy(f)}
                         for f in (*M_DEFAULTS, *M_GUIDE))]  # fmt: skip
    assert tally(extended) == {
        "optimized": (19, 85.77, 11),
        "guide": (9, 85.61, 2),
        "baseline": (3, 85.41, 0),
    }
    assert round(statistics.fmean(M_DEFAULTS.values()), 2) == 85.70


@pytest.mark.parametrize(
    ("variant", "quoted_mean", "negatives"), [("poolingmean", -0.31, 3), ("label_smoothing0.1", 0.09, 3)]
)
def test_encoder_m_pairs_the_readme_quotes(variant: str, quoted_mean: float, negatives: int) -> None:
    """Seeds 1-6, each variant against the default run of its seed."""
    field = {"poolingmean": ("pooling", "mean"), "label_smoothing0.1": ("label_smoothing", 0.1)}[variant]
    differences = []
    for seed in range(1, 7):
        paired = encoder_m_result(f"optimized-s{seed}-{variant}")
        assert paired["config"][field[0]] == field[1] and paired["config"]["seed"] == seed
        differences.append(
            encoder_m_accuracy(f"optimized-s{seed}-{variant}") - encoder_m_accuracy(f"optimized-s{seed}")
        )
    assert round(statistics.fmean(differences), 2) == quoted_mean
    assert sum(d < 0 for d in differences) == negatives


# Preset base (2026-12-06-h100-base-preset): the table's runs from one 80-epoch base encoder on an H100. A
# smaller model, so kept out of the tally of large encoders; its README and PENDING.md quote these figures.
BASE_PRESET = "2026-12-06-h100-base-preset"
BASE_QUOTED = {
    "optimized": (85.02, 85.14, 84.79),
    "guide": (85.71, 84.91, 86.81),
    "baseline": (86.00, 84.85, 86.35),
}  # seeds 1-3


def test_the_base_preset_runs_came_from_one_base_encoder_at_each_recipes_own_settings() -> None:
    pretrain = json.loads((BENCH / BASE_PRESET / "pretrain.json").read_text())
    assert (pretrain["model"]["layers"], pretrain["model"]["hidden"]) == (12, 768)
    assert (pretrain["settings"]["epochs"], pretrain["settings"]["mask_prob"]) == (80, 0.15)
    identities = set()
    for recipe, quoted in BASE_QUOTED.items():
        for seed, accuracy in enumerate(quoted, start=1):
            result = json.loads((BENCH / BASE_PRESET / f"{recipe}-s{seed}" / "result.json").read_text())
            where = f"{recipe}-s{seed}"
            assert result["config"]["preset"] == "base" and result["model"]["hidden"] == 768, where
            assert (result["recipe"], result["config"]["seed"], result["config"]["epochs"]) == (
                recipe,
                seed,
                3,
            )
            assert (result["global_batch"], result["lr"]) == pytest.approx(OWN_SETTINGS[recipe]), where
            identity = result["init"]["pretrain"]
            assert identity["final_loss"] == pretrain["final_loss"], where
            identities.add(identity["sha256"])
            assert round(100 * result["test"]["accuracy"], 2) == accuracy, where
    assert len(identities) == 1


def test_the_base_preset_means_the_docs_quote() -> None:
    means = {recipe: round(statistics.fmean(quoted), 2) for recipe, quoted in BASE_QUOTED.items()}
    assert means == {"optimized": 84.98, "guide": 85.81, "baseline": 85.73}
    assert round(statistics.fmean(a for quoted in BASE_QUOTED.values() for a in quoted), 2) == 85.51
    assert sum(a >= 86 for a in BASE_QUOTED["baseline"]) == 2


def test_the_base_preset_profiles_the_readme_quotes() -> None:
    """Why `optimized` ran 7.8-9.2x `guide` at base: each recipe's profiled step as its trace was summed up."""

    def profile(run: str) -> dict[str, Any]:
        result = json.loads((BENCH / BASE_PRESET / "profiled" / run / "result.json").read_text())
        assert result["config"]["preset"] == "base"
        return dict(result["profile"])

    guide, optimized = profile("guide-s1-profile_steps10"), profile("optimized-s1-profile_steps10")
    baseline = profile("baseline-s1-profile_steps10")
    assert (guide["bound"], round(guide["gpu_busy_share"], 2), guide["launches_per_step"]) == (
        "host",
        0.31,
        1895,
    )
    assert (optimized["bound"], optimized["graph_launches_per_step"], optimized["launches_per_step"]) == (
        "gpu",
        1,
        13,
    )
    assert round(optimized["gpu_busy_share"], 2) == 0.95
    assert (baseline["bound"], round(baseline["gpu_busy_share"], 2), baseline["launches_per_step"]) == (
        "gpu",
        0.98,
        643,
    )


# Encoder N (2026-12-06-h100-ngram-fusion): pretrained as the tally's (80 epochs, single characters at 15%,
# reviews only) on an H100, so its runs extend the tally as M's do. The first runs to carry their dev and test
# softmax, and the n-gram model averaged in (train/ngram.py). Run folder -> (encoder alone, with n-grams).
ENCODER_N = "2026-12-06-h100-ngram-fusion"
N_QUOTED = {
    "optimized-s1": (85.83, 86.06),
    "optimized-s2": (85.71, 85.94),
    "guide-s1": (86.41, 86.75),
    "guide-s2": (86.06, 86.52),
    "baseline-s1": (85.48, 86.52),
}


@functools.cache
def result_in(encoder_folder: str, run: str) -> dict[str, Any]:
    """A run's result.json in a benchmark folder of one encoder (read once: several tests read each)."""
    return dict(json.loads((BENCH / encoder_folder / run / "result.json").read_text()))


encoder_n_result = functools.partial(result_in, ENCODER_N)


def test_encoder_n_runs_are_tally_fine_tunes_from_one_eighty_epoch_single_character_encoder() -> None:
    pretrain = tally_pretraining(ENCODER_N)
    settings = pretrain["settings"]
    identities = set()
    for folder, (alone, fused) in N_QUOTED.items():
        result = encoder_n_result(folder)
        identity = result["init"]["pretrain"]
        assert identity["settings"] == settings and identity["final_loss"] == pretrain["final_loss"], folder
        identities.add(identity["sha256"])
        config = result["config"]
        assert (config["epochs"], config["task"], config["pooling"], config["ema_decay"]) == (
            3, "chnsenticorp", "cls", 0.0), folder  # fmt: skip
        assert (result["global_batch"], result["lr"]) == pytest.approx(OWN_SETTINGS[result["recipe"]]), folder
        assert round(100 * result["test"]["accuracy"], 2) == alone, folder
        assert round(100 * result["ngram_fusion"]["test"]["accuracy"], 2) == fused, folder
    assert len(identities) == 1


def with_h100_encoders(runs: list[dict[str, Any]], *, with_o: bool) -> list[dict[str, Any]]:
    """The H200 list with the default runs of the H100 encoders M and N (and O's plain runs)."""
    extended = [
        *runs,
        *({"recipe": encoder_m_result(f)["recipe"], "accuracy": encoder_m_accuracy(f)}
          for f in (*M_DEFAULTS, *M_GUIDE)),
        *({"recipe": encoder_n_result(f)["recipe"], "accuracy": alone} for f, (alone, _) in N_QUOTED.items()),
    ]  # fmt: skip
    if with_o:  # defined below, with encoder O's own tests
        extended += [
            {"recipe": encoder_o_result(f)["recipe"], "accuracy": plain} for f, (plain, _) in O_PAIRS.items()
        ]
    return extended


def test_the_tally_with_encoders_m_and_n(runs: list[dict[str, Any]]) -> None:
    """The README, PENDING.md and encoder N's README: the tally with M's and N's default runs."""
    assert tally(with_h100_encoders(runs, with_o=False)) == {
        "optimized": (21, 85.77, 11),
        "guide": (11, 85.72, 4),
        "baseline": (4, 85.43, 0),
    }


def test_encoder_n_with_n_grams_the_readme_quotes() -> None:
    """Each run's gain from the n-gram model, by recipe and over all five."""
    gains = {f: fused - alone for f, (alone, fused) in N_QUOTED.items()}
    assert all(g > 0 for g in gains.values())
    assert round(statistics.fmean(gains.values()), 2) == 0.46
    fused = [f for _, f in N_QUOTED.values()]
    assert round(statistics.fmean(fused), 2) == 86.36 and sum(f >= 86 for f in fused) == 4
    by_recipe = {
        recipe: round(
            statistics.fmean(
                100 * encoder_n_result(name)["ngram_fusion"]["test"]["accuracy"]
                for name in N_QUOTED
                if name.startswith(recipe)
            ),
            2,
        )
        for recipe in OWN_SETTINGS
    }
    assert by_recipe == {"optimized": 86.0, "guide": 86.64, "baseline": 86.52}


# Encoder O (2026-12-06-h100-rdrop): pretrained as the tally's, on an H100. Each seed ran with and without R-Drop
# (rdrop_alpha=4); the plain runs extend the tally, the pairs are the README's. Seed -> (plain, R-Drop) test.
ENCODER_O = "2026-12-06-h100-rdrop"
O_PAIRS = {
    "optimized-s1": (85.66, 85.83),
    "optimized-s2": (85.25, 86.58),
    "optimized-s3": (85.94, 86.06),
    "optimized-s4": (85.43, 85.83),
    "optimized-s5": (86.00, 86.29),
    "guide-s1": (86.00, 86.18),
}


encoder_o_result = functools.partial(result_in, ENCODER_O)


def test_encoder_o_pairs_differ_only_in_r_drop_and_come_from_one_encoder() -> None:
    pretrain = tally_pretraining(ENCODER_O)
    identities = set()
    for folder, (plain, rdrop) in O_PAIRS.items():
        first, second = encoder_o_result(folder), encoder_o_result(f"{folder}-rdrop_alpha4")
        assert (first["config"]["rdrop_alpha"], second["config"]["rdrop_alpha"]) == (0.0, 4.0), folder
        differing = {k for k in first["config"] if first["config"][k] != second["config"][k]}
        assert differing == {"rdrop_alpha"}, folder
        for result in (first, second):
            identity = result["init"]["pretrain"]
            assert identity["final_loss"] == pretrain["final_loss"], folder
            identities.add(identity["sha256"])
            assert (result["global_batch"], result["lr"]) == pytest.approx(OWN_SETTINGS[result["recipe"]])
            assert result["config"]["epochs"] == 3 and result["config"]["task"] == "chnsenticorp"
        quoted = (round(100 * first["test"]["accuracy"], 2), round(100 * second["test"]["accuracy"], 2))
        assert quoted == (plain, rdrop), folder
    assert len(identities) == 1


def test_encoder_o_r_drop_figures_the_readme_quotes() -> None:
    optimized = {f: pair for f, pair in O_PAIRS.items() if f.startswith("optimized")}
    gains = [rdrop - plain for plain, rdrop in optimized.values()]
    assert round(statistics.fmean(gains), 2) == 0.46 and all(g > 0 for g in gains)
    assert round(statistics.fmean(p for p, _ in optimized.values()), 2) == 85.66
    assert round(statistics.fmean(r for _, r in optimized.values()), 2) == 86.12
    assert all(rdrop > plain for plain, rdrop in O_PAIRS.values())
    # the epoch's cost: about 1.77x on optimized's replayed step, nothing on guide's host-bound one
    for folder, low, high in (("optimized-s1", 1.7, 1.85), ("guide-s1", 0.9, 1.05)):
        plain, rdrop = encoder_o_result(folder), encoder_o_result(f"{folder}-rdrop_alpha4")
        for a, b in zip(plain["epochs"], rdrop["epochs"], strict=True):
            assert low < b["epoch_seconds"] / a["epoch_seconds"] < high, folder


def test_the_tally_with_encoders_m_n_and_o(runs: list[dict[str, Any]]) -> None:
    """The README and PENDING.md: the tally of plain runs with M's, N's and O's."""
    assert tally(with_h100_encoders(runs, with_o=True)) == {
        "optimized": (26, 85.75, 12),
        "guide": (12, 85.74, 5),
        "baseline": (4, 85.43, 0),
    }


# Encoder P (2026-12-06-h100-rdrop-recipes): pretrained as the tally's, on an H100; the first runs of the recipes as
# they now are (R-Drop, rdrop_alpha=4, in all three). Run folder -> test accuracy as its README quotes it.
ENCODER_P = "2026-12-06-h100-rdrop-recipes"
P_RECIPES = {
    "optimized-s1": 86.52,
    "optimized-s2": 86.18,
    "optimized-s3": 86.52,
    "optimized-s4": 86.12,
    "guide-s1": 86.81,
    "guide-s2": 86.41,
    "guide-s3": 87.10,
    "baseline-s1": 86.46,
}
P_VARIANTS = {
    "guide-s1-rdrop_alpha0": 85.37,
    "guide-s2-rdrop_alpha0": 86.64,
    "optimized-s1-rdrop_share0.5": 85.83,
}

encoder_p_result = functools.partial(result_in, ENCODER_P)


def test_encoder_p_runs_are_the_recipes_with_r_drop_from_one_eighty_epoch_single_character_encoder() -> None:
    pretrain = tally_pretraining(ENCODER_P)
    identities = set()
    for folder, quoted in {**P_RECIPES, **P_VARIANTS}.items():
        result = encoder_p_result(folder)
        identity = result["init"]["pretrain"]
        assert identity["final_loss"] == pretrain["final_loss"], folder
        identities.add(identity["sha256"])
        config = result["config"]
        assert (config["epochs"], config["task"], config["pooling"], config["ema_decay"]) == (
            3, "chnsenticorp", "cls", 0.0), folder  # fmt: skip
        assert (result["global_batch"], result["lr"]) == pytest.approx(OWN_SETTINGS[result["recipe"]]), folder
        assert round(100 * result["test"]["accuracy"], 2) == quoted, folder
        if folder in P_RECIPES:
            assert (config["rdrop_alpha"], config["rdrop_share"]) == (4.0, 1.0), folder
    assert len(identities) == 1
    # each variant differs from the recipe run of its seed in the one field its name says
    for variant, field, value in (
        ("guide-s1-rdrop_alpha0", "rdrop_alpha", 0.0),
        ("guide-s2-rdrop_alpha0", "rdrop_alpha", 0.0),
        ("optimized-s1-rdrop_share0.5", "rdrop_share", 0.5),
    ):
        reference = encoder_p_result(variant.split("-rdrop")[0])["config"]
        config = encoder_p_result(variant)["config"]
        assert {k for k in config if config[k] != reference[k]} == {field} and config[field] == value, variant


def r_drop_runs(encoders: Iterable[str]) -> list[dict[str, Any]]:
    """The recipes as they now are (R-Drop on), each run's recipe and quoted accuracy, from the encoders named
    by letter (O and P here; Q-Z, AA and AB below): a string of one-letter names, or a list when AA or AB is among
    them."""
    by_letter: dict[str, tuple[str, dict[str, float]]] = {
        "O": (ENCODER_O, {f: rdrop for f, (_, rdrop) in O_PAIRS.items()}),
        "P": (ENCODER_P, P_RECIPES),
        "Q": (ENCODER_Q, Q_RECIPES),
        "R": (ENCODER_R, R_RECIPES),
        "S": (ENCODER_S, S_RECIPES),
        "T": (ENCODER_T, T_RECIPES),
        "U": (ENCODER_U, U_RECIPES),
        "V": (ENCODER_V, V_RECIPES),
        "W": (ENCODER_W, W_RECIPES),
        "X": (ENCODER_X, X_RECIPES),
        "Y": (ENCODER_Y, Y_RECIPES),
        "Z": (ENCODER_Z, Z_RECIPES),
        "AA": (ENCODER_AA, AA_RECIPES),
        "AB": (ENCODER_AB, AB_RECIPES),
    }
    return [
        {"recipe": result_in(folder, f)["recipe"], "accuracy": a}
        for folder, quoted in (by_letter[e] for e in encoders)
        for f, a in quoted.items()
    ]


def r_drop_tally() -> dict[str, tuple[int, float, int]]:
    """The recipes as they now are: O's R-Drop runs and P's."""
    return tally(r_drop_runs("OP"))


def test_the_r_drop_tally_the_docs_quote() -> None:
    """The README and PENDING.md: every recipe's mean with R-Drop at or above 86%, from encoders O and P."""
    assert r_drop_tally() == {"optimized": (9, 86.21, 7), "guide": (4, 86.62, 4), "baseline": (1, 86.46, 1)}
    by_recipe = {r: [a for f, a in P_RECIPES.items() if f.startswith(r)] for r in OWN_SETTINGS}
    assert {r: round(statistics.fmean(a), 2) for r, a in by_recipe.items()} == {
        "optimized": 86.34, "guide": 86.77, "baseline": 86.46}  # fmt: skip
    assert min(P_RECIPES.values()) >= 86


def test_the_plain_tally_with_encoder_p(runs: list[dict[str, Any]]) -> None:
    """P's two plain guide runs join the plain tally (README, PENDING.md)."""
    plain_p = [{"recipe": "guide", "accuracy": a} for f, a in P_VARIANTS.items() if "rdrop_alpha0" in f]
    assert tally([*with_h100_encoders(runs, with_o=True), *plain_p]) == {
        "optimized": (26, 85.75, 12),
        "guide": (14, 85.78, 6),
        "baseline": (4, 85.43, 0),
    }


def test_encoder_p_speed_figures_the_readme_quotes() -> None:
    """On that host guide's step was not host bound, so R-Drop cost it ~1.48x, and optimized ran ~2.55x guide."""

    def epochs(folder: str) -> list[float]:
        return [e["epoch_seconds"] for e in encoder_p_result(folder)["epochs"]]

    for seed in (1, 2):
        for plain, rdrop in zip(epochs(f"guide-s{seed}-rdrop_alpha0"), epochs(f"guide-s{seed}"), strict=True):
            assert 1.4 < rdrop / plain < 1.6
    for seed in (1, 2, 3):
        ratios = [g / o for g, o in zip(epochs(f"guide-s{seed}"), epochs(f"optimized-s{seed}"), strict=True)]
        assert all(2.5 < r < 2.8 for r in ratios) and statistics.median(ratios) < 3
    full, share = epochs("optimized-s1"), epochs("optimized-s1-rdrop_share0.5")
    assert all(1.25 < f / s < 1.3 for f, s in zip(full, share, strict=True))


# Encoder Q (2026-12-06-h100-rdrop-share-pairs): pretrained as the tally's, on an H100; `optimized` as its recipe
# then stood (full R-Drop) and paired by seed at rdrop_share=0.5 and at graph_grads=pool, and one `baseline`.
ENCODER_Q = "2026-12-06-h100-rdrop-share-pairs"
Q_RECIPES = {
    "optimized-s1": 85.94,
    "optimized-s2": 86.52,
    "optimized-s3": 86.52,
    "optimized-s4": 85.77,
    "baseline-s1": 86.52,
}
Q_SHARE = {"optimized-s1": 85.25, "optimized-s2": 85.89, "optimized-s3": 85.54, "optimized-s4": 86.23}
Q_POOL = ("optimized-s1", "optimized-s2")

encoder_q_result = functools.partial(result_in, ENCODER_Q)


def q_variant(folder: str, field: str) -> str:
    return {"rdrop_share": f"{folder}-rdrop_share0.5", "graph_grads": f"{folder}-graph_gradspool"}[field]


def r_drop_fine_tunes_of_one_encoder(encoder_folder: str, folders: list[str]) -> list[dict[str, Any]]:
    """The runs' results, each checked to be a 3-epoch R-Drop fine-tune at its recipe's own settings from the
    folder's one tally encoder."""
    pretrain = tally_pretraining(encoder_folder)
    results = [result_in(encoder_folder, folder) for folder in folders]
    for folder, result in zip(folders, results, strict=True):
        assert result["init"]["pretrain"]["final_loss"] == pretrain["final_loss"], folder
        config = result["config"]
        assert (config["epochs"], config["task"], config["pooling"], config["rdrop_alpha"]) == (
            3, "chnsenticorp", "cls", 4.0), folder  # fmt: skip
        assert (result["global_batch"], result["lr"]) == pytest.approx(OWN_SETTINGS[result["recipe"]]), folder
    assert len({result["init"]["pretrain"]["sha256"] for result in results}) == 1
    return results


def test_encoder_q_runs_are_the_recipes_with_r_drop_and_variants_of_one_field() -> None:
    folders = [*Q_RECIPES, *(q_variant(f, "rdrop_share") for f in Q_SHARE)]
    folders += [q_variant(f, "graph_grads") for f in Q_POOL]
    r_drop_fine_tunes_of_one_encoder(ENCODER_Q, folders)
    for folder, quoted in Q_RECIPES.items():
        config = encoder_q_result(folder)["config"]
        assert (config["rdrop_share"], config["graph_grads"]) == (1.0, "fixed"), folder
        assert round(100 * encoder_q_result(folder)["test"]["accuracy"], 2) == quoted, folder
    for field, value, seeds in (("rdrop_share", 0.5, Q_SHARE), ("graph_grads", "pool", Q_POOL)):
        for folder in seeds:
            reference, config = (
                encoder_q_result(folder)["config"],
                encoder_q_result(q_variant(folder, field))["config"],
            )
            assert {k for k in config if config[k] != reference[k]} == {field} and config[field] == value, (
                folder
            )
    for folder, quoted in Q_SHARE.items():
        assert (
            round(100 * encoder_q_result(q_variant(folder, "rdrop_share"))["test"]["accuracy"], 2) == quoted
        )


def test_rdrop_share_half_costs_about_half_a_point() -> None:
    """The README and PENDING.md: five pairs (P's one and Q's four), four down, -0.51 on average."""
    pairs = [(P_RECIPES["optimized-s1"], P_VARIANTS["optimized-s1-rdrop_share0.5"])]
    pairs += [(Q_RECIPES[f], share) for f, share in Q_SHARE.items()]
    differences = [share - full for full, share in pairs]
    assert round(statistics.fmean(differences), 2) == -0.51 and sum(d < 0 for d in differences) == 4
    assert round(statistics.fmean(differences[1:]), 2) == -0.46
    for folder in Q_SHARE:  # and it is 1.27-1.28x faster, epoch for epoch
        full = encoder_q_result(folder)["epochs"]
        share = encoder_q_result(q_variant(folder, "rdrop_share"))["epochs"]
        assert all(
            1.25 < f["epoch_seconds"] / s["epoch_seconds"] < 1.3 for f, s in zip(full, share, strict=True)
        )


def test_graph_grads_pool_trains_the_same_step_faster() -> None:
    """Pool gradients: the same losses and test answers as fixed ones, 2-2.5% more samples a second, 1.2 GB
    less at peak (the README and PENDING.md)."""
    for folder in Q_POOL:
        fixed, pool = encoder_q_result(folder), encoder_q_result(q_variant(folder, "graph_grads"))
        assert fixed["test"] == pool["test"], folder
        for field in ("dev_accuracy", "dev_loss"):
            assert [e[field] for e in fixed["epochs"]] == [e[field] for e in pool["epochs"]], folder
        step_losses = [
            [json.loads(line)["loss"] for line in (BENCH / ENCODER_Q / run / "metrics.jsonl").open()
             if '"type": "step"' in line]
            for run in (folder, q_variant(folder, "graph_grads"))
        ]  # fmt: skip
        assert len(step_losses[0]) == 19 and step_losses[0] == step_losses[1], folder
        for a, b in zip(fixed["epochs"], pool["epochs"], strict=True):
            assert 1.015 < b["samples_per_s"] / a["samples_per_s"] < 1.03, folder
            assert 1.1e9 < a["peak_memory_bytes"] - b["peak_memory_bytes"] < 1.3e9, folder
        answers = [
            json.loads((BENCH / ENCODER_Q / run / "test_predictions.json").read_text())
            for run in (folder, q_variant(folder, "graph_grads"))
        ]
        assert answers[0] == answers[1], folder


def test_the_r_drop_tally_with_encoder_q() -> None:
    """The README and PENDING.md: the tally of the recipes with R-Drop, from encoders O, P and Q."""
    optimized_o_p = r_drop_tally()["optimized"]
    assert tally(r_drop_runs("OPQ")) == {
        "optimized": (13, 86.21, 9), "guide": (4, 86.62, 4), "baseline": (2, 86.49, 2)}  # fmt: skip
    assert optimized_o_p == (9, 86.21, 7)
    assert round(statistics.fmean(a for f, a in Q_RECIPES.items() if f.startswith("optimized")), 2) == 86.19


# Encoder R (2026-12-06-h100-encoder-r): pretrained as the tally's, on an H100; the recipes as they now stand
# (R-Drop in all three, optimized with graph_grads=pool). Run folder -> test accuracy as its README quotes it.
ENCODER_R = "2026-12-06-h100-encoder-r"
R_RECIPES = {
    "optimized-s1": 86.46,
    "optimized-s2": 86.00,
    "optimized-s3": 86.06,
    "optimized-s4": 86.00,
    "guide-s1": 86.00,
    "guide-s2": 86.35,
    "guide-s3": 86.46,
    "baseline-s1": 86.41,
}


def speed_figures(
    encoder: str, seeds: tuple[int, ...], optimized_seeds: tuple[int, ...] = (1, 2, 3, 4)
) -> tuple[list[float], list[float], list[float]]:
    """optimized's samples/s over its seeds (1-4 unless named), and over the given seeds each epoch's
    guide-to-optimized time ratio and guide's samples/s."""

    def epochs(folder: str) -> list[dict[str, Any]]:
        return list(result_in(encoder, folder)["epochs"])

    rates = [e["samples_per_s"] for s in optimized_seeds for e in epochs(f"optimized-s{s}")]
    ratios = []
    for seed in seeds:
        guide, optimized = epochs(f"guide-s{seed}"), epochs(f"optimized-s{seed}")
        ratios += [g["epoch_seconds"] / o["epoch_seconds"] for g, o in zip(guide, optimized, strict=True)]
    guide_rates = [e["samples_per_s"] for s in seeds for e in epochs(f"guide-s{s}")]
    return rates, ratios, guide_rates


# Encoder S (2026-12-06-h100-encoder-s): pretrained as the tally's, on an H100; the recipes as they now stand.
# No baseline run: the second call had 478 s left when it came up (it needs ~470 s), the third 300 s in all.
ENCODER_S = "2026-12-06-h100-encoder-s"
S_RECIPES = {
    "optimized-s1": 86.23,
    "optimized-s2": 86.29,
    "optimized-s3": 86.41,
    "optimized-s4": 85.71,
    "guide-s1": 86.06,
    "guide-s2": 86.41,
    "guide-s3": 86.69,
    "guide-s4": 86.41,
}

# Encoder T (2026-12-07-h100-encoder-t): pretrained as the tally's, on an H100 whose host ran guide slower than any
# before; the recipes as they now stand. No profiled run: the third call ran out of device time.
ENCODER_T = "2026-12-07-h100-encoder-t"
T_RECIPES = {
    "optimized-s1": 86.98,
    "optimized-s2": 85.77,
    "optimized-s3": 86.29,
    "guide-s1": 86.58,
    "guide-s2": 86.58,
    "baseline-s1": 86.81,
}

# Encoder U (2026-12-07-h100-encoder-u): pretrained as the tally's, on a seventh H100 host, whose guide ran almost as
# slowly as T's; the recipes as they now stand, one seed each (the session's device time ran out after guide:1).
ENCODER_U = "2026-12-07-h100-encoder-u"
U_RECIPES = {
    "optimized-s1": 86.29,
    "guide-s1": 86.46,
    "baseline-s1": 86.75,
}

# Encoder V (2026-12-07-h100-bf16-residual): pretrained as the tally's, on a seventh H100 host; five optimized seeds,
# each paired with its bf16_residual twin (PENDING item 2), and guide seeds 1-2 for the host's ratio.
ENCODER_V = "2026-12-07-h100-bf16-residual"
V_RECIPES = {
    "optimized-s1": 86.06,
    "optimized-s2": 85.94,
    "optimized-s3": 86.41,
    "optimized-s4": 85.66,
    "optimized-s5": 86.52,
    "guide-s1": 86.46,
    "guide-s2": 85.66,
}
RESIDUAL = "-bf16_residualtrue"
V_RESIDUAL = {"optimized-s1": 86.12, "optimized-s2": 86.23, "optimized-s3": 86.64, "optimized-s4": 85.89,
              "optimized-s5": 86.64}  # fmt: skip

# Encoder W (2026-12-07-h100-encoder-w): pretrained as the tally's, on an eighth H100 host, whose CPU slowed by 40% in
# the middle of guide-s1; the recipes as they now stand, optimized with its bf16 residual stream (since c3b1e99).
ENCODER_W = "2026-12-07-h100-encoder-w"
W_RECIPES = {
    "optimized-s1": 86.35,
    "optimized-s2": 86.18,
    "optimized-s3": 85.94,
    "optimized-s4": 86.64,
    "guide-s1": 86.41,
    "guide-s2": 86.12,
    "guide-s3": 87.21,
}

# Encoder X (2026-12-07-h100-encoder-x): pretrained as the tally's, on a ninth H100 host, the fastest of the nine at
# guide; the recipes as they now stand, with baseline again (W had none).
ENCODER_X = "2026-12-07-h100-encoder-x"
X_RECIPES = {
    "optimized-s1": 86.41,
    "optimized-s2": 86.29,
    "optimized-s3": 86.64,
    "guide-s1": 86.75,
    "guide-s2": 86.0,
    "guide-s3": 87.27,
    "baseline-s1": 86.35,
}

# Encoder Y (2026-12-07-h100-encoder-y): pretrained as the tally's, on a tenth H100 host; the recipes as they now
# stand, four seeds of optimized and guide in three calls, no baseline (the session had 832 s left after the encoder).
ENCODER_Y = "2026-12-07-h100-encoder-y"
Y_RECIPES = {
    "optimized-s1": 86.18,
    "optimized-s2": 85.77,
    "optimized-s3": 86.06,
    "optimized-s4": 85.83,
    "guide-s1": 86.35,
    "guide-s2": 85.77,
    "guide-s3": 86.35,
    "guide-s4": 86.46,
}

# Encoder Z (2026-12-07-h100-encoder-z): pretrained as the tally's, on an eleventh H100 host; the recipes as they now
# stand, four seeds of optimized and guide in three calls, no baseline (the session had 791 s left after the encoder).
ENCODER_Z = "2026-12-07-h100-encoder-z"
Z_RECIPES = {
    "optimized-s1": 86.46,
    "optimized-s2": 86.35,
    "optimized-s3": 86.06,
    "optimized-s4": 85.89,
    "guide-s1": 87.04,
    "guide-s2": 86.46,
    "guide-s3": 86.98,
    "guide-s4": 87.15,
}

# Encoder AA (2026-12-07-h100-encoder-aa): pretrained as the tally's, on a twelfth H100 host; the recipes as they now
# stand, three seeds of optimized and guide and one of baseline in three calls.
ENCODER_AA = "2026-12-07-h100-encoder-aa"
AA_RECIPES = {
    "optimized-s1": 85.77,
    "optimized-s2": 85.66,
    "optimized-s3": 86.35,
    "guide-s1": 86.69,
    "guide-s2": 86.58,
    "guide-s3": 86.81,
    "baseline-s1": 86.23,
}

# Encoder AB (2026-12-07-h100-encoder-ab): pretrained as the tally's, on a fourteenth H100 host, for PENDING item 3:
# optimized and guide of seeds 1 and 2, optimized of seed 3, and item 3's variants (ITEM3_AB) in three calls.
ENCODER_AB = "2026-12-07-h100-encoder-ab"
AB_RECIPES = {
    "optimized-s1": 86.41,
    "optimized-s2": 86.29,
    "optimized-s3": 85.66,
    "guide-s1": 86.0,
    "guide-s2": 86.23,
}
ITEM3_AB = {
    "optimized-s1-batch_size64": 86.46,
    "optimized-s1-lr_scalingsqrt": 86.35,
    "optimized-s2-lr_scalingsqrt": 87.04,
}

# One epoch of each recipe from scratch (`capture_next.sh`'s ITEM=speed, no encoder: the speed half of issue 4's 3x
# line only), on two H100 hosts: the first on 2026-12-06, the second on 2026-12-07 in two calls on one machine.
SPEED_LAUNCH = "2026-12-06-h100-speed-launch"
SPEED_HOST_1 = "2026-12-07-h100-speed-host/call1"
SPEED_HOST_2 = "2026-12-07-h100-speed-host/call2"


@pytest.mark.parametrize(
    ("folder", "runs"),
    [
        (SPEED_LAUNCH, ("optimized-s1", "guide-s1", "optimized-s1-profile_steps10")),
        (SPEED_HOST_1, ("optimized-s1", "guide-s1", "optimized-s2", "guide-s2", "baseline-s1",
                        "optimized-s1-profile_steps10")),
        (SPEED_HOST_2, ("optimized-s1", "guide-s1", "optimized-s2", "guide-s2", "optimized-s1-profile_steps10")),
    ],
)  # fmt: skip
def test_the_speed_runs_are_one_epoch_from_scratch_of_the_recipes_as_they_now_stand(
    folder: str, runs: tuple[str, ...]
) -> None:
    """No encoder, one epoch, R-Drop in full, pool gradients for optimized alone; the seed in the folder's name."""
    assert (BENCH / folder / "encoder.id").read_text().strip() == "none"
    assert sorted(p.name for p in (BENCH / folder).iterdir() if p.is_dir()) == sorted(runs)
    for run in runs:
        result = result_in(folder, run)
        config = result["config"]
        assert result["init"] is None and len(result["epochs"]) == config["epochs"] == 1, run
        assert (config["ema_decay"], config["rdrop_share"]) == (0.0, 1.0), run
        assert config["graph_grads"] == ("pool" if result["recipe"] == "optimized" else "fixed"), run
        assert config["seed"] == int(run.split("-s")[1][0]), run
        assert result["global_batch"] == pytest.approx(OWN_SETTINGS[result["recipe"]][0]), run
    # from the same seed the same weights: the profiler changes the timing, not the model
    assert (
        result_in(folder, "optimized-s1-profile_steps10")["test"] == result_in(folder, "optimized-s1")["test"]
    )


def step_losses(folder: str, run: str) -> list[float]:
    lines = (BENCH / folder / run / "metrics.jsonl").read_text().splitlines()
    return [record["loss"] for record in map(json.loads, lines) if record.get("type") == "step"]


def test_the_second_call_on_one_machine_trains_the_same_models_again() -> None:
    """The speed host's two calls ran the same runs on one warm machine: identical test answers, so the calls
    differ only in timing."""
    for run in ("optimized-s1", "guide-s1", "optimized-s2", "guide-s2"):
        first, second = result_in(SPEED_HOST_1, run), result_in(SPEED_HOST_2, run)
        assert first["test"] == second["test"], run
        assert first["epochs"][0]["dev_loss"] == second["epochs"][0]["dev_loss"], run
        assert step_losses(SPEED_HOST_1, run) == step_losses(SPEED_HOST_2, run), run


@pytest.mark.parametrize(
    ("encoder", "step_ms", "shares"),
    [
        (ENCODER_R, 75.3, {"gemm": 49, "elementwise": 29, "attention": 14, "optimizer": 5}),
        (ENCODER_S, 79.9, {"gemm": 49, "elementwise": 29, "attention": 15, "optimizer": 6}),
        (SPEED_HOST_1, 76.3, {"gemm": 49, "elementwise": 29, "attention": 14, "optimizer": 5}),
        (SPEED_HOST_2, 76.8, {"gemm": 49, "elementwise": 29, "attention": 14, "optimizer": 5}),
        (ENCODER_V, 76.0, {"gemm": 49, "elementwise": 29, "attention": 15, "optimizer": 5}),
        (ENCODER_W, 72.5, {"gemm": 50, "elementwise": 27, "attention": 15, "optimizer": 6}),
    ],
)
def test_the_profiled_step_the_readmes_quote(encoder: str, step_ms: float, shares: dict[str, int]) -> None:
    """One replay a step, GPU bound, GEMMs about half the kernel time (48% on the first host, 49% on R's, S's and
    the 2026-12-07 speed host's, in both its calls; 50% on W's, whose optimized keeps its residual stream in bf16)."""
    profile = result_in(encoder, "optimized-s1-profile_steps10")["profile"]
    assert (profile["steps"], profile["bound"], profile["graph_launches_per_step"]) == (10, "gpu", 1.0)
    assert round(profile["step_ms"], 1) == step_ms and round(profile["gpu_busy_share"], 2) == 0.98
    by_class = {c["class"]: round(100 * c["share"]) for c in profile["kernel_classes"]}
    assert {k: by_class[k] for k in shares} == shares


@pytest.mark.parametrize(
    ("encoder", "recipes"),
    [
        (ENCODER_R, R_RECIPES),
        (ENCODER_S, S_RECIPES),
        (ENCODER_T, T_RECIPES),
        (ENCODER_U, U_RECIPES),
        (ENCODER_V, V_RECIPES),
        (ENCODER_W, W_RECIPES),
        (ENCODER_X, X_RECIPES),
        (ENCODER_Y, Y_RECIPES),
        (ENCODER_Z, Z_RECIPES),
        (ENCODER_AA, AA_RECIPES),
        (ENCODER_AB, AB_RECIPES),
    ],
)
def test_the_recipes_as_they_now_stand_from_one_encoder(encoder: str, recipes: dict[str, float]) -> None:
    """Encoders R-AB: R-Drop in full, pool gradients for optimized alone, the seed in the folder's name; the bf16
    residual stream in optimized from W on (V's twins have their own test)."""
    profiled = "optimized-s1-profile_steps10"
    folders = [*recipes, *([profiled] if (BENCH / encoder / profiled).is_dir() else [])]
    for folder, result in zip(folders, r_drop_fine_tunes_of_one_encoder(encoder, folders), strict=True):
        config = result["config"]
        assert (config["ema_decay"], config["rdrop_share"]) == (0.0, 1.0), folder
        expected_grads = "pool" if result["recipe"] == "optimized" else "fixed"
        assert config["graph_grads"] == expected_grads, folder
        assert config.get("bf16_residual", False) == (
            encoder in (ENCODER_W, ENCODER_X, ENCODER_Y, ENCODER_Z, ENCODER_AA, ENCODER_AB)
            and result["recipe"] == "optimized"
        ), folder
        assert config["seed"] == int(folder.split("-s")[1][0]), folder
    for folder, quoted in recipes.items():
        assert round(100 * result_in(encoder, folder)["test"]["accuracy"], 2) == quoted, folder
    # the profiled run is seed 1 again: the profiler changes the timing, not the model
    if profiled in folders:
        assert result_in(encoder, profiled)["test"] == result_in(encoder, "optimized-s1")["test"]


ENCODERS_O_TO_Z = (
    ENCODER_O,
    ENCODER_P,
    ENCODER_Q,
    ENCODER_R,
    ENCODER_S,
    ENCODER_T,
    ENCODER_U,
    ENCODER_V,
    ENCODER_W,
    ENCODER_X,
    ENCODER_Y,
    ENCODER_Z,
)


def distinct_pretrainings(encoders: tuple[str, ...]) -> tuple[int, int]:
    """How many different encoders the folders hold: by final pretraining loss, and by recorded id (the folders from
    R on record one)."""
    losses = {tally_pretraining(e)["final_loss"] for e in encoders}
    with_ids = encoders[3:]
    return len(losses), len({(BENCH / e / "encoder.id").read_text() for e in with_ids})


def test_the_r_drop_tally_comes_from_twelve_pretrainings() -> None:
    assert distinct_pretrainings(ENCODERS_O_TO_Z) == (12, 9)


def test_encoder_aa_is_a_thirteenth_pretraining() -> None:
    """AA's encoder is pretrained as the tally's and is none of O-Z's: a loss and an id of its own."""
    assert distinct_pretrainings((*ENCODERS_O_TO_Z, ENCODER_AA)) == (13, 10)
    assert (BENCH / ENCODER_AA / "encoder.id").read_text().strip() == "f5ed2e7f0b034abc"


def test_the_r_drop_tally_with_encoder_s() -> None:
    """The README and PENDING.md: the recipes with R-Drop over encoders O-S, every mean at or above 86%."""
    with_s = tally(r_drop_runs("OPQRS"))
    assert with_s == {"optimized": (21, 86.18, 16), "guide": (11, 86.44, 11), "baseline": (3, 86.46, 3)}
    assert round(with_s["optimized"][1] - with_s["guide"][1], 2) == -0.26
    by_recipe = {r: [a for f, a in S_RECIPES.items() if f.startswith(r)] for r in ("optimized", "guide")}
    assert {r: round(statistics.fmean(a), 2) for r, a in by_recipe.items()} == {
        "optimized": 86.16,
        "guide": 86.39,
    }


@pytest.mark.parametrize(
    ("encoders", "whole", "difference", "own"),
    [
        (
            "OPQR",
            {"optimized": (17, 86.19, 13), "guide": (7, 86.47, 7), "baseline": (3, 86.46, 3)},
            -0.28,
            {"optimized": (4, 86.13, 4), "guide": (3, 86.27, 3), "baseline": (1, 86.41, 1)},
        ),
        (
            "OPQRST",
            {"optimized": (24, 86.2, 18), "guide": (13, 86.46, 13), "baseline": (4, 86.55, 4)},
            -0.26,
            {"optimized": (3, 86.35, 2), "guide": (2, 86.58, 2), "baseline": (1, 86.81, 1)},
        ),
        (
            "OPQRSTU",
            {"optimized": (25, 86.21, 19), "guide": (14, 86.46, 14), "baseline": (5, 86.59, 5)},
            -0.25,
            {"optimized": (1, 86.29, 1), "guide": (1, 86.46, 1), "baseline": (1, 86.75, 1)},
        ),
    ],
)
def test_the_r_drop_tally_after_encoders_r_t_and_u(
    encoders: str,
    whole: dict[str, tuple[int, float, int]],
    difference: float,
    own: dict[str, tuple[int, float, int]],
) -> None:
    """The README and PENDING.md: the recipes with R-Drop over O-R, O-T and O-U, every mean at or above 86%, and
    the last encoder's own runs (S, without baseline, has its test above)."""
    with_last = tally(r_drop_runs(encoders))
    assert with_last == whole
    assert round(with_last["optimized"][1] - with_last["guide"][1], 2) == difference
    assert tally(r_drop_runs(encoders[-1])) == own


def own_means_and_passes(recipes: dict[str, float]) -> dict[str, tuple[float, int]]:
    """One encoder's optimized and guide runs: each recipe's mean test accuracy and its runs at or above 86%."""
    own = {r: [a for f, a in recipes.items() if f.startswith(r)] for r in ("optimized", "guide")}
    return {r: (round(statistics.fmean(a), 2), sum(x >= 86 for x in a)) for r, a in own.items()}


def optimized_as_it_stands(*later: dict[str, float]) -> list[float]:
    """optimized as it now stands (the bf16 residual stream): V's bf16 twins and the optimized runs of the later
    encoders named."""
    return [
        *V_RESIDUAL.values(),
        *(a for runs in later for f, a in runs.items() if f.startswith("optimized")),
    ]


def test_the_r_drop_tally_with_encoder_v() -> None:
    """The README and PENDING.md: the recipes with R-Drop over O-V (V has no baseline run), and V's own runs: its
    optimized seeds below 86% twice of five, guide once of two."""
    with_v = tally(r_drop_runs("OPQRSTUV"))
    assert with_v == {"optimized": (30, 86.19, 22), "guide": (16, 86.41, 15), "baseline": (5, 86.59, 5)}
    assert round(with_v["optimized"][1] - with_v["guide"][1], 2) == -0.22
    assert own_means_and_passes(V_RECIPES) == {
        "optimized": (86.12, 3),
        "guide": (86.06, 1),
    }


def test_the_r_drop_tally_with_encoder_w() -> None:
    """The README and PENDING.md: the recipes with R-Drop over O-W (W has no baseline run; its optimized runs count
    as optimized, as each encoder's did in its day), W's own runs, and optimized as it now stands: V's bf16 twins
    and W's optimized runs."""
    with_w = tally(r_drop_runs("OPQRSTUVW"))
    assert with_w == {"optimized": (34, 86.2, 25), "guide": (19, 86.44, 18), "baseline": (5, 86.59, 5)}
    assert round(with_w["optimized"][1] - with_w["guide"][1], 2) == -0.24
    assert own_means_and_passes(W_RECIPES) == {
        "optimized": (86.28, 3),
        "guide": (86.58, 3),
    }
    as_it_stands = optimized_as_it_stands(W_RECIPES)
    assert (len(as_it_stands), round(statistics.fmean(as_it_stands), 2)) == (9, 86.29)
    assert sum(x >= 86 for x in as_it_stands) == 7


def optimized_against_guide(encoder: str, seeds: tuple[int, ...]) -> list[dict[str, Any]]:
    """Each optimized run's test answers paired with guide's of its seed (`compare_runs`: difference, McNemar p and
    the discordant reviews)."""
    from dgxperf.train.paired import compare_runs

    return [compare_runs(BENCH / encoder / f"optimized-s{s}", BENCH / encoder / f"guide-s{s}") for s in seeds]


def test_encoder_w_seed_pairs_the_readme_quotes() -> None:
    """optimized against guide of its seed: -0.06 (p = 1), +0.06 (p = 1), -1.27 (p = 0.015, 76 discordant);
    mean -0.42, inside issue 4's 0.5."""
    pairs = optimized_against_guide(ENCODER_W, (1, 2, 3))
    assert [round(100 * p["difference"], 2) for p in pairs] == [-0.06, 0.06, -1.27]
    assert [round(p["p_value"], 3) for p in pairs] == [1.0, 1.0, 0.015]
    assert pairs[2]["a_only"] + pairs[2]["b_only"] == 76
    assert round(statistics.fmean(100 * p["difference"] for p in pairs), 2) == -0.42


def test_the_r_drop_tally_with_encoder_x() -> None:
    """The README and PENDING.md: the recipes with R-Drop over O-X, X's own runs (every one at or above 86%), and
    optimized as it now stands: V's bf16 twins, W's and X's optimized runs."""
    with_x = tally(r_drop_runs("OPQRSTUVWX"))
    assert with_x == {"optimized": (37, 86.22, 28), "guide": (22, 86.47, 21), "baseline": (6, 86.55, 6)}
    assert round(with_x["optimized"][1] - with_x["guide"][1], 2) == -0.25
    assert tally(r_drop_runs("X")) == {
        "optimized": (3, 86.45, 3),
        "guide": (3, 86.67, 3),
        "baseline": (1, 86.35, 1),
    }
    as_it_stands = optimized_as_it_stands(W_RECIPES, X_RECIPES)
    assert (len(as_it_stands), round(statistics.fmean(as_it_stands), 2)) == (12, 86.33)
    assert sum(x >= 86 for x in as_it_stands) == 10


def test_encoder_x_seed_pairs_the_readme_quotes() -> None:
    """optimized against guide of its seed: -0.35 (p = 0.62), +0.29 (p = 0.66), -0.63 (p = 0.27); mean -0.23, inside
    issue 4's 0.5; baseline-s1 against guide-s1 -0.40 (p = 0.39)."""
    from dgxperf.train.paired import compare_runs

    pairs = [
        compare_runs(BENCH / ENCODER_X / f"{recipe}-s{s}", BENCH / ENCODER_X / f"guide-s{s}")
        for recipe, s in (("optimized", 1), ("optimized", 2), ("optimized", 3), ("baseline", 1))
    ]
    assert [round(100 * p["difference"], 2) for p in pairs] == [-0.35, 0.29, -0.63, -0.40]
    assert [round(p["p_value"], 2) for p in pairs] == [0.62, 0.66, 0.27, 0.39]
    assert [p["a_only"] + p["b_only"] for p in pairs[:3]] == [104, 81, 83]
    assert round(statistics.fmean(100 * p["difference"] for p in pairs[:3]), 2) == -0.23


def test_the_r_drop_tally_with_encoder_y() -> None:
    """The README and PENDING.md: the recipes with R-Drop over O-Y (Y has no baseline run), Y's own runs (two of four
    optimized and three of four guide at or above 86%), and optimized as it now stands: V's bf16 twins, W's, X's and
    Y's optimized runs."""
    with_y = tally(r_drop_runs("OPQRSTUVWXY"))
    assert with_y == {"optimized": (41, 86.2, 30), "guide": (26, 86.44, 24), "baseline": (6, 86.55, 6)}
    assert round(with_y["optimized"][1] - with_y["guide"][1], 2) == -0.24
    assert own_means_and_passes(Y_RECIPES) == {
        "optimized": (85.96, 2),
        "guide": (86.23, 3),
    }
    as_it_stands = optimized_as_it_stands(W_RECIPES, X_RECIPES, Y_RECIPES)
    assert (len(as_it_stands), round(statistics.fmean(as_it_stands), 2)) == (16, 86.24)
    assert sum(x >= 86 for x in as_it_stands) == 12


def test_encoder_y_seed_pairs_the_readme_quotes() -> None:
    """optimized against guide of its seed: -0.17 (p = 0.8), 0.00 (p = 1), -0.29 (p = 0.65), -0.63 (p = 0.27); mean
    -0.27, inside issue 4's 0.5."""
    pairs = optimized_against_guide(ENCODER_Y, (1, 2, 3, 4))
    assert [round(100 * p["difference"], 2) for p in pairs] == [-0.17, 0.0, -0.29, -0.63]
    assert [round(p["p_value"], 2) for p in pairs] == [0.8, 1.0, 0.65, 0.27]
    assert [p["a_only"] + p["b_only"] for p in pairs] == [63, 88, 79, 81]
    assert round(statistics.fmean(100 * p["difference"] for p in pairs), 2) == -0.27


def test_the_r_drop_tally_with_encoder_z() -> None:
    """The README and PENDING.md: the recipes with R-Drop over O-Z (Z has no baseline run), Z's own runs (three of four
    optimized and all four guide at or above 86%, guide's 86.91% the highest of any encoder), and optimized as it now
    stands: V's bf16 twins, W's, X's, Y's and Z's optimized runs."""
    with_z = tally(r_drop_runs("OPQRSTUVWXYZ"))
    assert with_z == {"optimized": (45, 86.2, 33), "guide": (30, 86.5, 28), "baseline": (6, 86.55, 6)}
    assert round(with_z["optimized"][1] - with_z["guide"][1], 2) == -0.3
    assert own_means_and_passes(Z_RECIPES) == {
        "optimized": (86.19, 3),
        "guide": (86.91, 4),
    }
    as_it_stands = optimized_as_it_stands(W_RECIPES, X_RECIPES, Y_RECIPES, Z_RECIPES)
    assert (len(as_it_stands), round(statistics.fmean(as_it_stands), 2)) == (20, 86.23)
    assert sum(x >= 86 for x in as_it_stands) == 15


def test_encoder_z_seed_pairs_the_readme_quotes() -> None:
    """optimized against guide of its seed: -0.58 (p = 0.37), -0.12 (p = 0.91), -0.92 (p = 0.11), -1.27 (p = 0.01);
    every pair below guide, mean -0.72: from this one encoder outside issue 4's 0.5."""
    pairs = optimized_against_guide(ENCODER_Z, (1, 2, 3, 4))
    assert [round(100 * p["difference"], 2) for p in pairs] == [-0.58, -0.12, -0.92, -1.27]
    assert [round(p["p_value"], 2) for p in pairs] == [0.37, 0.91, 0.11, 0.01]
    assert [p["a_only"] + p["b_only"] for p in pairs] == [100, 84, 86, 68]
    assert round(statistics.fmean(100 * p["difference"] for p in pairs), 2) == -0.72


def test_the_r_drop_tally_with_encoder_aa() -> None:
    """The README and PENDING.md: the recipes with R-Drop over O-AA, AA's own runs (one of three optimized, all three
    guide and its one baseline at or above 86%), and optimized as it now stands: V's bf16 twins, W's, X's, Y's, Z's
    and AA's optimized runs."""
    with_aa = tally(r_drop_runs([*"OPQRSTUVWXYZ", "AA"]))
    assert with_aa == {"optimized": (48, 86.18, 34), "guide": (33, 86.52, 31), "baseline": (7, 86.5, 7)}
    assert round(with_aa["optimized"][1] - with_aa["guide"][1], 2) == -0.34
    assert tally(r_drop_runs(["AA"])) == {
        "optimized": (3, 85.93, 1),
        "guide": (3, 86.69, 3),
        "baseline": (1, 86.23, 1),
    }
    as_it_stands = optimized_as_it_stands(W_RECIPES, X_RECIPES, Y_RECIPES, Z_RECIPES, AA_RECIPES)
    assert (len(as_it_stands), round(statistics.fmean(as_it_stands), 2)) == (23, 86.19)
    assert sum(x >= 86 for x in as_it_stands) == 16


def test_encoder_aa_seed_pairs_the_readme_quotes() -> None:
    """optimized against guide of its seed: -0.92 (p = 0.09), -0.92 (p = 0.11), -0.46 (p = 0.41); every pair below
    guide, mean -0.77: from this one encoder outside issue 4's 0.5, as from Z; baseline-s1 against guide-s1 -0.46
    (p = 0.34)."""
    from dgxperf.train.paired import compare_runs

    pairs = [*optimized_against_guide(ENCODER_AA, (1, 2, 3)),
             compare_runs(BENCH / ENCODER_AA / "baseline-s1", BENCH / ENCODER_AA / "guide-s1")]  # fmt: skip
    assert [round(100 * p["difference"], 2) for p in pairs] == [-0.92, -0.92, -0.46, -0.46]
    assert [round(p["p_value"], 2) for p in pairs] == [0.09, 0.11, 0.41, 0.34]
    assert [p["a_only"] + p["b_only"] for p in pairs] == [80, 88, 72, 54]
    assert round(statistics.fmean(100 * p["difference"] for p in pairs[:3]), 2) == -0.77


def seed_pairs(encoder: str, optimized_suffix: str = "") -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(optimized, guide) results of every seed the folder has both of, optimized's folder named with the suffix."""
    present = [
        seed
        for seed in range(1, 9)
        if (BENCH / encoder / f"optimized-s{seed}{optimized_suffix}").is_dir()
        and (BENCH / encoder / f"guide-s{seed}").is_dir()
    ]
    return [
        (result_in(encoder, f"optimized-s{seed}{optimized_suffix}"), result_in(encoder, f"guide-s{seed}"))
        for seed in present
    ]


# the encoders whose folders pair optimized and guide by seed, optimized with its residual stream in fp32 (pool
# gradients on, R-V) and in bf16 (W on; V's bf16 twins are the suffixed folders of V)
FP32_STREAM = (ENCODER_R, ENCODER_S, ENCODER_T, ENCODER_U, ENCODER_V)
BF16_STREAM = (ENCODER_W, ENCODER_X, ENCODER_Y, ENCODER_Z, ENCODER_AA)


def pairs_of(encoders: tuple[str, ...]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [pair for encoder in encoders for pair in seed_pairs(encoder)]


def accuracy_differences(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> list[float]:
    """optimized's test accuracy less guide's, in points, pair by pair."""
    return [round(100 * (o["test"]["accuracy"] - g["test"]["accuracy"]), 2) for o, g in pairs]


def two_sided_sign_test(differences: list[float]) -> float:
    """The sign test's p (ties dropped): how often a fair coin gives a split this lopsided."""
    signs = [d > 0 for d in differences if d != 0]
    n, k = len(signs), max(sum(signs), len(signs) - sum(signs))
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k, n + 1)) / 2**n)


def test_optimized_as_it_stands_falls_below_guide_in_fifteen_of_nineteen_seed_pairs() -> None:
    """The README and PENDING.md item 3: every seed pair of optimized and guide from one encoder since optimized
    took its bf16 residual stream (V's five twins where V has guide, then W-AA): 19 pairs, mean -0.42 points (sd
    0.50), 15 below guide, 3 above, one tie (sign test p = 0.008). With its fp32 stream (R-V, 12 pairs): -0.16,
    8 below (p = 0.39). Inside issue 4's 0.5 on average, but one H200 pair from an sd of 0.5 lands outside it
    almost as often as inside. V's twins against their own fp32 seeds were +0.18 (a test above), so the two
    figures differ by encoder draw as much as by the stream: no cause is named here."""
    bf16_stream = accuracy_differences(seed_pairs(ENCODER_V, RESIDUAL) + pairs_of(BF16_STREAM))
    fp32_stream = accuracy_differences(pairs_of(FP32_STREAM))
    assert (len(bf16_stream), round(statistics.fmean(bf16_stream), 2), round(statistics.stdev(bf16_stream), 2)) == (
        19, -0.42, 0.5)  # fmt: skip
    assert (sum(d < 0 for d in bf16_stream), sum(d > 0 for d in bf16_stream)) == (15, 3)
    assert round(two_sided_sign_test(bf16_stream), 3) == 0.008
    assert (len(fp32_stream), round(statistics.fmean(fp32_stream), 2), sum(d < 0 for d in fp32_stream)) == (
        12, -0.16, 8)  # fmt: skip
    assert round(two_sided_sign_test(fp32_stream), 2) == 0.39


def test_optimized_trails_guide_on_dev_every_epoch_and_fits_the_test_set_less_tightly() -> None:
    """PENDING.md item 3's grounds: over the 31 pairs since pool gradients (R-AA, V's bf16 twins with their guide
    too), optimized's dev accuracy is 2.54 points under guide's after epoch 1 (28 pairs below), 0.78 after epoch 2
    (24) and 0.38 after epoch 3 (27), the gap closing as training goes on; and its test loss is lower than guide's
    in all 31 (by 0.017 on average), its answers less confident: the signs of a model trained less far, as one
    taking half guide's optimizer steps (batch 128 against 64) would be."""
    pairs = pairs_of(FP32_STREAM) + seed_pairs(ENCODER_V, RESIDUAL) + pairs_of(BF16_STREAM)
    assert len(pairs) == 31
    by_epoch = [
        [100 * (o["epochs"][e]["dev_accuracy"] - g["epochs"][e]["dev_accuracy"]) for o, g in pairs]
        for e in range(3)
    ]
    assert [round(statistics.fmean(d), 2) for d in by_epoch] == [-2.54, -0.78, -0.38]
    assert [sum(x < 0 for x in d) for d in by_epoch] == [28, 24, 27]
    test_loss = [o["test"]["loss"] - g["test"]["loss"] for o, g in pairs]
    assert sum(x < 0 for x in test_loss) == 31 and round(statistics.fmean(test_loss), 3) == -0.017
    steps = {(o["steps"], g["steps"]) for o, g in pairs}
    assert steps == {(327, 654)}


def test_half_the_optimizer_steps_cost_about_four_tenths_of_a_point_on_the_h200_before_r_drop() -> None:
    """PENDING.md item 3's grounds, from 2026-12-04 on the H200 (no R-Drop then): guide at batch 128 with lr 1e-4
    (327 steps) against guide at 64 (654 steps), encoder H: -0.17 and -0.52; optimized at 256 (165 steps, lr 1e-4)
    against optimized at 128 (327 steps), encoder J: -0.35 and -0.52. Every pair below, mean -0.39: about
    optimized's gap to guide now."""
    seeds = (BENCH / "2026-12-04-h200-encoder-h" / "seeds", BENCH / "2026-12-04-h200-encoder-j" / "seeds")
    pairs = [(seeds[0] / f"guide-s{s}-grad_accum4-lr1e-4", seeds[0] / f"guide-s{s}") for s in (1, 2)] + [
        (seeds[1] / f"optimized-s{s}-batch_size256-lr_scalingsqrt", seeds[1] / f"optimized-s{s}")
        for s in (1, 2)
    ]
    results = [tuple(json.loads((p / "result.json").read_text()) for p in pair) for pair in pairs]
    assert [(fewer["steps"], more["steps"]) for fewer, more in results] == [(327, 654)] * 2 + [(165, 327)] * 2
    assert [(fewer["lr"], more["lr"]) for fewer, more in results] == [(1e-4, 5e-5)] * 2 + [(1e-4, 1e-4)] * 2
    differences = [round(100 * (f["test"]["accuracy"] - m["test"]["accuracy"]), 2) for f, m in results]
    assert differences == [-0.17, -0.52, -0.35, -0.52]
    assert round(statistics.fmean(differences), 2) == -0.39


def logged_rates(folder: str, run: str) -> list[float]:
    lines = (BENCH / folder / run / "metrics.jsonl").read_text().splitlines()
    return [r["samples_per_s"] for r in map(json.loads, lines) if r.get("type") == "step"]


def recording_window(call: int, start: str, end: str) -> list[dict[str, Any]]:
    """W's call's NVML recording between two UTC times of 2026-12-07 (HH:MM:SS)."""
    import datetime

    def at(clock: str) -> float:
        moment = datetime.datetime.fromisoformat(f"2026-12-07T{clock}+00:00")
        return moment.timestamp()

    recording = BENCH / ENCODER_W / f"monitor-seeds-call{call}.jsonl.gz"
    lines = gzip.decompress(recording.read_bytes()).decode().splitlines()[1:]
    return [r for r in map(json.loads, lines) if at(start) <= r["t"] <= at(end)]


def test_w_host_slowed_by_forty_percent_in_the_middle_of_guide_s1_with_its_process_at_one_core() -> None:
    """The README: guide-s1's logged steps ran ~520 samples/s for ~320 steps, then ~310, and guide seeds 2 and 3 ran
    at that pace; the process held one core throughout, the SM clock's median stayed at 1,980 MHz, the SMs went from
    73% to 44% active; steal showed after the change, but hardly in guide-s3, just as slow; optimized moved ~1%."""
    rates = logged_rates(ENCODER_W, "guide-s1")[1:]  # the first interval holds the warm-up
    before, after = rates[:15], rates[17:]
    assert round(statistics.median(before)) == 521 and round(statistics.median(after)) == 314
    later = [r for seed in (2, 3) for r in logged_rates(ENCODER_W, f"guide-s{seed}")[1:]]
    assert 320 < statistics.median(later) < 340
    for start, end, sm_active, steal_readings, lowest_clock in (
        ("10:21:45", "10:22:21", 73, 2, 1965),  # guide-s1 before the change
        ("10:22:23", "10:23:33", 44, 68, 1935),  # guide-s1 after it
    ):
        window = recording_window(2, start, end)
        gpu = [r["gpus"][0] for r in window]
        cpu = [p["cpu_pct"] for g in gpu for p in g.get("processes") or [] if p.get("cpu_pct") is not None]
        assert 99 < statistics.median(cpu) < 102, start
        clocks = [g["sm_clock_mhz"] for g in gpu]
        assert (statistics.median(clocks), min(clocks)) == (1980, lowest_clock), start
        assert round(statistics.median(g["sm_active_pct"] for g in gpu)) == sm_active, start
        assert sum(r["host"]["steal_pct"] > 0 for r in window) == steal_readings, start
    guide_3 = recording_window(3, "10:33:20", "10:35:45")
    assert len(guide_3) == 145 and sum(r["host"]["steal_pct"] > 0 for r in guide_3) == 12
    before_rates = [e["samples_per_s"] for e in result_in(ENCODER_W, "optimized-s1")["epochs"]]
    after_rates = [
        e["samples_per_s"] for s in (2, 3) for e in result_in(ENCODER_W, f"optimized-s{s}")["epochs"]
    ]
    assert statistics.median(before_rates) / statistics.median(after_rates) - 1 < 0.012


def test_the_bf16_streams_profiled_step_on_w_host_splits_its_elementwise_time_as_v_twin_did() -> None:
    """The README: W's profiled step 72.5 ms; dropout/residual/norm 47% of the elementwise time (9.3 ms), GELU 34%
    (6.7 ms), the QKV gradient's concatenation 12% (2.3 ms); V's bf16 twin 48 / 33 / 11%."""
    from dgxperf.train.trace import load_trace, summarize_trace

    splits = []
    for folder, run in (
        (ENCODER_W, "optimized-s1-profile_steps10"),
        (ENCODER_V, "optimized-s1-profile_steps10" + RESIDUAL),
    ):
        summary = summarize_trace(load_trace(BENCH / folder / run / "profile/trace.json.gz"))
        splits.append(
            {
                g["group"]: (round(100 * g["share"]), round(g["ms_per_step"], 1))
                for g in summary["elementwise_groups"]
            }
        )
    assert splits[0] == {"dropout_residual_norm": (47, 9.3), "activation": (34, 6.7), "concatenation": (12, 2.3),
                         "other": (7, 1.4)}  # fmt: skip
    assert {g: share for g, (share, _) in splits[1].items()} == {
        "dropout_residual_norm": 48, "activation": 33, "concatenation": 11, "other": 7}  # fmt: skip


def test_each_bf16_residual_twin_differs_from_its_optimized_seed_in_that_field_alone() -> None:
    """PENDING item 2's pairs: one encoder, the same seed, bf16_residual the only field apart (the profiled pair
    too); each twin's accuracy as the README quotes it, and the profiler changes no answer."""
    profiled = "optimized-s1-profile_steps10"
    twins = [f + RESIDUAL for f in V_RESIDUAL]
    results = r_drop_fine_tunes_of_one_encoder(
        ENCODER_V, [*V_RESIDUAL, *twins, profiled, profiled + RESIDUAL]
    )
    by_folder = dict(zip([*V_RESIDUAL, *twins, profiled, profiled + RESIDUAL], results, strict=True))
    for folder, quoted in V_RESIDUAL.items():
        plain, twin = by_folder[folder]["config"], by_folder[folder + RESIDUAL]["config"]
        assert {k for k in plain if plain[k] != twin[k]} == {"bf16_residual"}, folder
        assert (plain["bf16_residual"], twin["bf16_residual"]) == (False, True), folder
        assert round(100 * by_folder[folder + RESIDUAL]["test"]["accuracy"], 2) == quoted, folder
    assert by_folder[profiled + RESIDUAL]["test"] == by_folder["optimized-s1" + RESIDUAL]["test"]


def test_bf16_residual_runs_each_epoch_about_two_and_a_half_percent_faster_with_the_accuracy_held() -> None:
    """The README and PENDING.md, against item 2's predictions: +1.6 to +2.9% samples/s an epoch, median +2.4%
    (predicted +3-6%: missed); 1.64 GB less at peak (1-3 GB: held); every twin at or above its seed, +0.18
    points on average (within ±1.2 each and ±0.6 on average: held); the first logged losses (step 20) at most
    0.0012 apart (under 0.05: held)."""
    gains, differences = [], []
    for folder in V_RESIDUAL:
        plain, twin = result_in(ENCODER_V, folder), result_in(ENCODER_V, folder + RESIDUAL)
        for a, b in zip(plain["epochs"], twin["epochs"], strict=True):
            gains.append(b["samples_per_s"] / a["samples_per_s"] - 1)
            assert round((a["peak_memory_bytes"] - b["peak_memory_bytes"]) / 1e9, 2) == 1.64, folder
        differences.append(100 * (twin["test"]["accuracy"] - plain["test"]["accuracy"]))
        first = [step_losses(ENCODER_V, run)[0] for run in (folder, folder + RESIDUAL)]
        assert abs(first[0] - first[1]) < 0.0012, folder
    assert (round(100 * min(gains), 1), round(100 * max(gains), 1)) == (1.6, 2.9)
    assert round(100 * statistics.median(gains), 1) == 2.4
    assert min(differences) > 0 and round(statistics.fmean(differences), 2) == 0.18


def test_the_profiled_bf16_residual_pair_shortens_the_dropout_residual_and_norm_fusions_by_a_sixth() -> None:
    """The README: the step 76.0 -> 73.2 ms (3.6% shorter); the dropout/residual/LayerNorm fusions 11.9 -> 10.0 ms
    a step, 16% shorter (predicted 25-40%: missed); GEMM time within 0.5% (within 2%: held); GELU and the QKV
    gradient unchanged."""
    from dgxperf.train.trace import load_trace, summarize_trace

    figures = []
    for run in ("optimized-s1-profile_steps10", "optimized-s1-profile_steps10" + RESIDUAL):
        trace = load_trace(BENCH / ENCODER_V / run / "profile/trace.json.gz")
        summary = summarize_trace(trace)
        by_class = {c["class"]: c["ms_per_step"] for c in summary["kernel_classes"]}
        groups = {g["group"]: g["ms_per_step"] for g in summary["elementwise_groups"]}
        figures.append((summary["step_ms"], by_class["gemm"], groups))
    (step, gemm, groups), (step_bf16, gemm_bf16, groups_bf16) = figures
    assert (round(step, 1), round(step_bf16, 1)) == (76.0, 73.2)
    assert round(1 - step_bf16 / step, 3) == 0.036
    assert abs(gemm_bf16 / gemm - 1) < 0.005
    fused, fused_bf16 = groups["dropout_residual_norm"], groups_bf16["dropout_residual_norm"]
    assert (round(fused, 1), round(fused_bf16, 1), round(1 - fused_bf16 / fused, 2)) == (11.9, 10.0, 0.16)
    for group in ("activation", "concatenation"):
        assert abs(groups_bf16[group] / groups[group] - 1) < 0.01, group


@pytest.mark.parametrize(
    ("encoder", "seeds", "optimized_seeds", "rates", "ratios", "median", "at_3x", "guide"),
    [
        (ENCODER_R, (1, 2, 3), (1, 2, 3, 4), (1468, 1489), (2.67, 3.19), 2.88, 2, (513, 460)),
        (ENCODER_S, (1, 2, 3, 4), (1, 2, 3, 4), (1459, 1473), (2.71, 3.08), 2.83, 1, (518, 476)),
        (ENCODER_T, (1, 2), (1, 2, 3), (1470, 1482), (3.26, 3.78), 3.47, 6, (425, 389)),
        (ENCODER_U, (1,), (1,), (1485, 1495), (3.34, 3.59), 3.37, 3, (442, 414)),
        (SPEED_HOST_1, (1, 2), (1, 2), (1455, 1465), (2.73, 2.81), 2.77, 0, (527, 520)),
        (SPEED_HOST_2, (1, 2), (1, 2), (1460, 1468), (2.66, 2.93), 2.79, 0, (525, 499)),
        (ENCODER_V, (1, 2), (1, 2, 3, 4, 5), (1475, 1495), (2.62, 2.83), 2.68, 0, (556, 526)),
        (ENCODER_W, (1, 2, 3), (1, 2, 3, 4), (1490, 1525), (3.24, 4.89), 4.54, 9, (328, 308)),
        (ENCODER_X, (1, 2, 3), (1, 2, 3), (1485, 1505), (2.62, 2.8), 2.63, 0, (569, 530)),
        (ENCODER_Y, (1, 2, 3, 4), (1, 2, 3, 4), (1505, 1520), (2.75, 3.35), 2.89, 3, (524, 452)),
        (ENCODER_Z, (1, 2, 3, 4), (1, 2, 3, 4), (1487, 1509), (2.62, 2.84), 2.65, 0, (567, 526)),
        (ENCODER_AA, (1, 2, 3), (1, 2, 3), (1492, 1517), (2.61, 2.83), 2.65, 0, (569, 531)),
        (ENCODER_AB, (1, 2), (1, 2, 3), (1510, 1525), (3.34, 3.87), 3.58, 6, (425, 392)),
    ],
)
def test_the_speed_figures_the_readmes_quote(
    encoder: str,
    seeds: tuple[int, ...],
    optimized_seeds: tuple[int, ...],
    rates: tuple[int, int],
    ratios: tuple[float, float],
    median: float,
    at_3x: int,
    guide: tuple[int, int],
) -> None:
    """optimized GPU bound at ~1,470 samples/s on every host; guide host bound, so the ratio is the host's: median
    2.88x on R's (two epoch pairs of nine at 3x), 2.83x on S's (one of twelve), 3.47x on T's (six of six, guide
    389-455 samples/s), 2.77x and 2.79x in the 2026-12-07 speed host's two calls (none of four, guide 499-551),
    3.37x on U's (three of three, guide 414-446), 2.68x on V's (none of six, guide 526-566), 4.54x on W's (nine of
    nine, guide 308-466; optimized with the bf16 stream there and on X's and Y's), 2.63x on X's (none of nine, guide
    530-572), 2.89x on Y's (three of twelve, guide 452-550), 2.65x on Z's (none of twelve, guide 526-571), 2.65x on
    AA's (none of nine, guide 531-573), 3.58x on AB's (six of six, guide 392-454)."""
    optimized_rates, epoch_ratios, guide_rates = speed_figures(encoder, seeds, optimized_seeds)
    assert rates[0] < min(optimized_rates) and max(optimized_rates) < rates[1]
    assert (round(min(epoch_ratios), 2), round(max(epoch_ratios), 2)) == ratios
    assert round(statistics.median(epoch_ratios), 2) == median and sum(r >= 3 for r in epoch_ratios) == at_3x
    assert (round(statistics.median(guide_rates)), round(min(guide_rates))) == guide


# Each encoder host from R to AA: its folder and the seeds with both an optimized and a guide run
ENCODER_HOST_SEEDS = {
    "R": (ENCODER_R, (1, 2, 3)),
    "S": (ENCODER_S, (1, 2, 3, 4)),
    "T": (ENCODER_T, (1, 2)),
    "U": (ENCODER_U, (1,)),
    "V": (ENCODER_V, (1, 2)),
    "W": (ENCODER_W, (1, 2, 3)),
    "X": (ENCODER_X, (1, 2, 3)),
    "Y": (ENCODER_Y, (1, 2, 3, 4)),
    "Z": (ENCODER_Z, (1, 2, 3, 4)),
    "AA": (ENCODER_AA, (1, 2, 3)),
}


def host_median_ratios() -> dict[str, float]:
    """Each H100 host's median epoch ratio with pool gradients and R-Drop in all three recipes (the 2026-12-07
    speed host's two calls pooled, as one machine)."""
    hosts = {
        "2026-12-06 speed host": speed_figures(SPEED_LAUNCH, (1,), (1,))[1],
        "2026-12-07 speed host": speed_figures(SPEED_HOST_1, (1, 2), (1, 2))[1]
        + speed_figures(SPEED_HOST_2, (1, 2), (1, 2))[1],
        **{
            host: speed_figures(folder, seeds, seeds)[1]
            for host, (folder, seeds) in ENCODER_HOST_SEEDS.items()
        },
    }
    return {host: round(statistics.median(ratios), 2) for host, ratios in hosts.items()}


def test_eight_of_the_eleven_hosts_that_ran_the_recipes_as_they_stand_give_under_3x() -> None:
    """The README and PENDING.md, up to encoder Z's host."""
    medians = host_median_ratios()
    del medians["AA"]
    assert medians == {
        "2026-12-06 speed host": 2.82,
        "R": 2.88,
        "S": 2.83,
        "T": 3.47,
        "2026-12-07 speed host": 2.77,
        "U": 3.37,
        "V": 2.68,
        "W": 4.54,
        "X": 2.63,
        "Y": 2.89,
        "Z": 2.65,
    }
    assert sum(m < 3 for m in medians.values()) == 8


def test_nine_of_the_twelve_hosts_that_ran_the_recipes_as_they_stand_give_under_3x() -> None:
    """The README and PENDING.md, with encoder AA's host: 2.65x, as Z's."""
    medians = host_median_ratios()
    assert medians["AA"] == 2.65
    assert sorted(medians.values()) == [
        2.63,
        2.65,
        2.65,
        2.68,
        2.77,
        2.82,
        2.83,
        2.88,
        2.89,
        3.37,
        3.47,
        4.54,
    ]
    assert sum(m < 3 for m in medians.values()) == 9


def eager_launch_readings(encoder: str, calls: int) -> list[float]:
    """What `bench launch` read for one eager launch (µs) at the head of each call's log-table-callN.txt."""
    return [
        json.loads(line.split("bench launch: ", 1)[1])["eager"]["us_per_op"]
        for call in range(1, calls + 1)
        for line in (BENCH / encoder / f"log-table-call{call}.txt").read_text().splitlines()
        if "bench launch: " in line
    ]


def test_x_host_ran_guide_fastest_of_the_encoder_hosts() -> None:
    """The README: X's host ran guide at a median 569 samples/s, above every other encoder host's (hence the
    lowest median ratio, in the test above); its eager launch cost ~6 µs in each of the three calls."""
    guide_medians = {
        encoder: statistics.median(speed_figures(encoder, seeds, (1,))[2])
        for encoder, seeds in (
            (ENCODER_R, (1, 2, 3)),
            (ENCODER_S, (1, 2, 3, 4)),
            (ENCODER_T, (1, 2)),
            (ENCODER_U, (1,)),
            (ENCODER_V, (1, 2)),
            (ENCODER_W, (1, 2, 3)),
            (ENCODER_X, (1, 2, 3)),
            (ENCODER_Y, (1, 2, 3, 4)),
            (ENCODER_Z, (1, 2, 3, 4)),
        )
    }
    assert max(guide_medians, key=guide_medians.__getitem__) == ENCODER_X
    assert round(guide_medians[ENCODER_X]) == 569 and round(guide_medians[ENCODER_V]) == 556
    assert round(guide_medians[ENCODER_Z]) == 567  # the next fastest, from a host reading 6-10 µs a launch
    launches = eager_launch_readings(ENCODER_X, calls=3)
    assert launches == [6.007, 6.022, 5.961]


def test_aa_host_ran_guide_as_fast_as_x_host_and_read_six_microseconds_a_launch_as_it_did() -> None:
    """The README: AA's host ran guide at a median 568.8 samples/s, X's at 568.7 (a tie, the two fastest of twelve
    hosts), and both read ~6 µs for an eager launch in each of their three calls; Z's host, reading 6-10 µs, ran
    guide at 567."""
    medians = {
        encoder: round(statistics.median(speed_figures(encoder, seeds, (1,))[2]), 1)
        for encoder, seeds in ((ENCODER_X, (1, 2, 3)), (ENCODER_Z, (1, 2, 3, 4)), (ENCODER_AA, (1, 2, 3)))
    }
    assert medians == {ENCODER_X: 568.7, ENCODER_Z: 567.3, ENCODER_AA: 568.8}
    assert eager_launch_readings(ENCODER_AA, calls=3) == [6.05, 5.998, 5.918]
    assert eager_launch_readings(ENCODER_X, calls=3) == [6.007, 6.022, 5.961]


def test_y_host_launch_reading_moved_by_two_fifths_between_calls_on_one_machine() -> None:
    """The README: bench launch read an eager launch at 10.67 / 11.51 / 6.81 µs in Y's three calls on one machine;
    guide-s4, the one guide run in the call with the lowest reading, ran the fastest of Y's four (median 542
    samples/s against 507-525), one run, so not read as cause."""
    launches = eager_launch_readings(ENCODER_Y, calls=3)
    assert launches == [10.67, 11.512, 6.812]
    guide_medians = {
        s: round(statistics.median(speed_figures(ENCODER_Y, (s,), (1,))[2])) for s in (1, 2, 3, 4)
    }
    assert guide_medians == {1: 520, 2: 507, 3: 525, 4: 542}


def test_z_host_ran_guide_at_one_pace_whatever_its_launch_reading() -> None:
    """The README: bench launch read 9.18 / 10.16 / 6.17 µs in Z's three calls on one machine, and guide's four runs
    kept one pace through them (medians 566-571 samples/s): the reading again says nothing of guide's speed."""
    assert eager_launch_readings(ENCODER_Z, calls=3) == [9.183, 10.16, 6.169]
    guide_medians = {
        s: round(statistics.median(speed_figures(ENCODER_Z, (s,), (1,))[2])) for s in (1, 2, 3, 4)
    }
    assert guide_medians == {1: 567, 2: 571, 3: 566, 4: 571}


# the same split on every host that kept its trace (the summary's elementwise_groups, from the kernels' names)
ELEMENTWISE_SHARES = {"activation": 30, "concatenation": 10, "dropout_residual_norm": 53, "other": 6}


@pytest.mark.parametrize(
    ("encoder", "largest", "elementwise_ms"),
    [
        (ENCODER_R, (3.374, 2.39, 2.365), 22.4),
        (ENCODER_S, (3.42, 2.415, 2.413), 22.7),
        (SPEED_HOST_1, (3.438, 2.469, 2.412), 22.8),
        (ENCODER_V, (3.409, 2.422, 2.365), 22.5),
    ],
)
def test_the_profiled_traces_give_their_results_again_and_say_where_elementwise_time_goes(
    encoder: str, largest: tuple[float, ...], elementwise_ms: float
) -> None:
    """Each trace came back with its run (R's, S's, the 2026-12-07 speed host's first call's and V's): it gives
    result.json's profile again, and its elementwise ~29% is dropout, residual adds and LayerNorm (about half),
    GELU (30%) and the fused QKV's gradient (a tenth)."""
    from dgxperf.train.trace import load_trace, summarize_trace

    trace = load_trace(BENCH / encoder / "optimized-s1-profile_steps10/profile/trace.json.gz")
    summary = summarize_trace(trace)
    quoted = result_in(encoder, "optimized-s1-profile_steps10")["profile"]
    for field in set(quoted) - {"trace", "requested_steps", "kernel_classes"}:
        assert summary[field] == quoted[field], field

    # result.json has kept each class's largest kernels since f3c8ba7 (R's and S's runs came before it)
    def classes(summary: dict[str, Any]) -> list[dict[str, Any]]:
        return [{k: v for k, v in c.items() if k != "kernels"} for c in summary["kernel_classes"]]

    assert classes(summary) == classes(quoted)
    elementwise = next(c for c in summary["kernel_classes"] if c["class"] == "elementwise")
    assert [k["name"] for k in elementwise["kernels"]] == [
        "triton_poi_fused_gelu_gelu_backward_view",
        "triton_poi_fused_gelu_view",
        "triton_per_fused__to_copy_add_native_dropout_backward_native_layer_norm_backward_view",
    ]
    assert tuple(k["ms_per_step"] for k in elementwise["kernels"]) == largest
    groups = summary["elementwise_groups"]
    assert (
        round(sum(g["ms_per_step"] for g in groups), 1)
        == round(elementwise["ms_per_step"], 1)
        == elementwise_ms
    )
    assert {g["group"]: round(100 * g["share"]) for g in groups} == ELEMENTWISE_SHARES


# PENDING item 3's speed half (2026-12-07-h100-item3-speed): one epoch from scratch each, on a thirteenth H100 host;
# 784 s of device time were left when it came, too little for the encoder, so accuracy waits for another session.
ITEM3_SPEED = "2026-12-07-h100-item3-speed"


def test_item_3_batch_64_runs_nine_percent_slower_in_half_the_memory_and_the_sqrt_lr_costs_nothing() -> None:
    """Item 3's speed predictions, written before the call: batch_size=64 4-12% fewer samples/s than optimized of
    its seed (1,330-1,440 on an H100) with 17-25 GB reserved; lr_scaling=sqrt the same speed within 1%. Measured:
    -9.4 / -9.1%, 1,388 / 1,398 samples/s, 20.0 / 20.1 GB reserved (graphs' pool 14.8 GB against 28.9), twice the
    steps; sqrt +0.0 / -0.1%."""
    for seed, (slower, sqrt_change) in ((1, (9.4, 0.0)), (2, (9.1, -0.1))):
        optimized = result_in(ITEM3_SPEED, f"optimized-s{seed}")
        batch_64 = result_in(ITEM3_SPEED, f"optimized-s{seed}-batch_size64")
        sqrt = result_in(ITEM3_SPEED, f"optimized-s{seed}-lr_scalingsqrt")
        rate = {name: r["epochs"][0]["samples_per_s"] for name, r in
                (("optimized", optimized), ("64", batch_64), ("sqrt", sqrt))}  # fmt: skip
        assert round(100 * (1 - rate["64"] / rate["optimized"]), 1) == slower
        assert 4 <= slower <= 12 and 1330 < rate["64"] < 1440
        assert round(100 * (rate["sqrt"] / rate["optimized"] - 1), 1) == sqrt_change
        assert abs(sqrt_change) < 1
        reserved = batch_64["epochs"][0]["peak_reserved_bytes"] / 1e9
        assert 17 < reserved < 25 and round(reserved) == 20
        assert round(optimized["epochs"][0]["peak_reserved_bytes"] / 1e9) == 34
        assert (batch_64["steps"], optimized["steps"], sqrt["steps"]) == (218, 109, 109)
        assert batch_64["global_batch"] == 64 and optimized["global_batch"] == sqrt["global_batch"] == 128


def test_item_3_host_ran_optimized_just_under_three_times_guide_and_read_eleven_microseconds_a_launch() -> (
    None
):
    """The README: the thirteenth H100 host ran guide at 511 samples/s and optimized at 2.99x it (one epoch pair, a
    hair under the 3x line), batch_size=64 at 2.71x; bench launch read 11.46 µs for an eager launch, as high as
    Y's host in one call (11.51), with a guide speed inside the hosts' range."""
    guide = result_in(ITEM3_SPEED, "guide-s1")["epochs"][0]
    optimized = result_in(ITEM3_SPEED, "optimized-s1")["epochs"][0]
    batch_64 = result_in(ITEM3_SPEED, "optimized-s1-batch_size64")["epochs"][0]
    assert round(guide["samples_per_s"]) == 511
    assert round(guide["epoch_seconds"] / optimized["epoch_seconds"], 3) == 2.993
    assert round(optimized["samples_per_s"] / guide["samples_per_s"], 2) == 2.99
    assert round(guide["epoch_seconds"] / batch_64["epoch_seconds"], 2) == 2.71
    header = (BENCH / ITEM3_SPEED / "log-host-call1.txt").read_text()
    launch = json.loads(header.split("== bench launch: ", 1)[1].splitlines()[0])
    assert launch["eager"]["us_per_op"] == 11.455
    assert max(eager_launch_readings(ENCODER_Y, calls=3)) == 11.512


def test_from_scratch_one_epoch_runs_learn_at_218_steps_and_stall_at_109() -> None:
    """An aside, not issue 4's regime (no encoder): one epoch from scratch, every distinct run at 218 optimizer
    steps (guide, baseline, optimized at batch 64; five runs) reached 79-80% while of four at 109 (optimized at
    batch 128, either lr) two never left the majority class (52.02%) and two reached 75%."""
    runs = {
        (ITEM3_SPEED, "guide-s1"): 79.78,
        (ITEM3_SPEED, "optimized-s1-batch_size64"): 79.67,
        (ITEM3_SPEED, "optimized-s2-batch_size64"): 78.97,
        ("2026-12-07-h100-speed-host/call1", "guide-s2"): 79.38,
        ("2026-12-07-h100-speed-host/call1", "baseline-s1"): 79.49,
        (ITEM3_SPEED, "optimized-s1"): 74.71,
        (ITEM3_SPEED, "optimized-s2"): 52.02,
        (ITEM3_SPEED, "optimized-s1-lr_scalingsqrt"): 52.02,
        (ITEM3_SPEED, "optimized-s2-lr_scalingsqrt"): 75.23,
    }
    by_steps: dict[int, list[float]] = {}
    for (folder, run), quoted in runs.items():
        result = result_in(folder, run)
        assert result["config"]["epochs"] == 1 and not result["init"], run
        assert round(100 * result["summary"]["test_accuracy"], 2) == quoted, run
        by_steps.setdefault(result["steps"], []).append(quoted)
    assert min(by_steps[218]) > 78.9 and len(by_steps[218]) == 5
    assert sorted(by_steps[109]) == [52.02, 52.02, 74.71, 75.23]


def test_ten_of_thirteen_hosts_give_under_3x_with_the_item_3_speed_host() -> None:
    """The README and PENDING.md: the item-3 speed host's one epoch pair, 2.99x, joins the twelve hosts' medians."""
    medians = host_median_ratios()
    medians["2026-12-07 item-3 speed host"] = round(
        statistics.median(speed_figures(ITEM3_SPEED, (1,), (1, 2))[1]), 2
    )
    assert medians["2026-12-07 item-3 speed host"] == 2.99
    assert (len(medians), sum(m < 3 for m in medians.values())) == (13, 10)


# PENDING item 3's accuracy half, from encoder AB (2026-12-07-h100-encoder-ab): one session's runs, far fewer pairs
# than the item needs; its predictions were written before any run (PENDING.md, 2026-12-07).


def test_encoder_ab_is_a_fourteenth_pretraining() -> None:
    """AB's encoder is pretrained as the tally's and is none of O-AA's: a loss and an id of its own."""
    assert distinct_pretrainings((*ENCODERS_O_TO_Z, ENCODER_AA, ENCODER_AB)) == (14, 11)
    assert (BENCH / ENCODER_AB / "encoder.id").read_text().strip() == "04946877a65eb4ae"


def test_each_item_3_variant_differs_from_optimized_of_its_seed_in_its_one_field() -> None:
    """batch_size=64 is guide's batch, lr and step count (654 steps at 5e-5); lr_scaling=sqrt keeps optimized's batch
    and steps at 7.07e-5. Nothing else in the config differs, and every run starts from AB's encoder."""
    for variant, field in (("-batch_size64", "batch_size"), ("-lr_scalingsqrt", "lr_scaling")):
        for seed in (1, 2) if field == "lr_scaling" else (1,):
            plain, changed = (
                result_in(ENCODER_AB, f"optimized-s{seed}"),
                result_in(ENCODER_AB, f"optimized-s{seed}{variant}"),
            )
            differing = {k for k in plain["config"] if plain["config"][k] != changed["config"].get(k)}
            assert differing == {field}, (seed, variant)
            assert changed["init"] == plain["init"] and changed["init"], (seed, variant)
    guide, batch_64 = result_in(ENCODER_AB, "guide-s1"), result_in(ENCODER_AB, "optimized-s1-batch_size64")
    assert (batch_64["global_batch"], batch_64["steps"], batch_64["lr"]) == (64, 654, 5e-05)
    assert (guide["global_batch"], guide["steps"], guide["lr"]) == (64, 654, 5e-05)
    sqrt = result_in(ENCODER_AB, "optimized-s1-lr_scalingsqrt")
    assert (sqrt["global_batch"], sqrt["steps"], round(sqrt["lr"], 7)) == (128, 327, 7.07e-05)
    for folder, quoted in ITEM3_AB.items():
        assert round(100 * result_in(ENCODER_AB, folder)["test"]["accuracy"], 2) == quoted, folder


def test_encoder_ab_puts_optimized_above_guide_in_both_seed_pairs() -> None:
    """The README: from AB, optimized +0.40 (p = 0.49) and +0.06 (p = 1) against guide of its seed, so this encoder
    shows none of the gap item 3 looks for; yet optimized's dev after epoch 1 is again under guide's (-2.59 and
    -0.17) and its test loss again lower (0.337 / 0.349 against 0.360 / 0.372): the signs without the gap."""
    pairs = optimized_against_guide(ENCODER_AB, (1, 2))
    assert [round(100 * p["difference"], 2) for p in pairs] == [0.4, 0.06]
    assert [round(p["p_value"], 2) for p in pairs] == [0.49, 1.0]
    assert [p["a_only"] + p["b_only"] for p in pairs] == [75, 97]
    after_epoch_1 = [
        round(100 * (o["epochs"][0]["dev_accuracy"] - g["epochs"][0]["dev_accuracy"]), 2)
        for o, g in seed_pairs(ENCODER_AB)
    ]
    assert after_epoch_1 == [-2.59, -0.17]
    assert all(o["test"]["loss"] < g["test"]["loss"] for o, g in seed_pairs(ENCODER_AB))


def test_the_r_drop_tally_with_encoder_ab() -> None:
    """The README and PENDING.md: the recipes with R-Drop over O-AB; optimized as it now stands (V's twins, W-AB)."""
    with_ab = tally(r_drop_runs([*"OPQRSTUVWXYZ", "AA", "AB"]))
    assert with_ab == {"optimized": (51, 86.18, 36), "guide": (35, 86.49, 33), "baseline": (7, 86.5, 7)}
    assert round(with_ab["optimized"][1] - with_ab["guide"][1], 2) == -0.31
    assert own_means_and_passes(AB_RECIPES) == {"optimized": (86.12, 2), "guide": (86.12, 2)}
    as_it_stands = optimized_as_it_stands(W_RECIPES, X_RECIPES, Y_RECIPES, Z_RECIPES, AA_RECIPES, AB_RECIPES)
    assert (len(as_it_stands), round(statistics.fmean(as_it_stands), 2)) == (26, 86.18)
    assert sum(x >= 86 for x in as_it_stands) == 18


def test_with_encoder_ab_optimized_falls_below_guide_in_fifteen_of_twenty_one_seed_pairs() -> None:
    """The README and PENDING.md item 3: AB's two pairs, both above, join the 19 since the bf16 stream: 21 pairs,
    mean -0.36 (sd 0.52), 15 below, 5 above, one tie, sign test p = 0.041. Over the 33 pairs since pool gradients
    dev trails guide's after epochs 1 / 2 / 3 by 2.47 / 0.76 / 0.37 points (30 / 25 / 28 below) and the test loss
    is lower in all 33."""
    bf16_stream = accuracy_differences(seed_pairs(ENCODER_V, RESIDUAL) + pairs_of((*BF16_STREAM, ENCODER_AB)))
    assert (len(bf16_stream), round(statistics.fmean(bf16_stream), 2), round(statistics.stdev(bf16_stream), 2)) == (
        21, -0.36, 0.52)  # fmt: skip
    assert (sum(d < 0 for d in bf16_stream), sum(d > 0 for d in bf16_stream)) == (15, 5)
    assert round(two_sided_sign_test(bf16_stream), 3) == 0.041
    pairs = pairs_of(FP32_STREAM) + seed_pairs(ENCODER_V, RESIDUAL) + pairs_of((*BF16_STREAM, ENCODER_AB))
    by_epoch = [
        [100 * (o["epochs"][e]["dev_accuracy"] - g["epochs"][e]["dev_accuracy"]) for o, g in pairs]
        for e in range(3)
    ]
    assert len(pairs) == 33
    assert [round(statistics.fmean(d), 2) for d in by_epoch] == [-2.47, -0.76, -0.37]
    assert [sum(x < 0 for x in d) for d in by_epoch] == [30, 25, 28]
    assert all(o["test"]["loss"] < g["test"]["loss"] for o, g in pairs)


def test_item_3_batch_64_fits_as_far_as_guide_with_the_accuracy_of_optimized() -> None:
    """Item 3's accuracy predictions on their first pairs. batch_size=64 against optimized of its seed: +0.06 (p = 1;
    predicted +0.2 to +0.6 on average: one pair, under it); against guide +0.46 (predicted within 0.3: missed, above);
    its dev after epoch 1 0.18 over guide's (predicted within 1 point: held), where optimized's was 2.59 under; and its
    test loss 0.356, by guide's 0.360 and not optimized's 0.337. Twice the steps make the fine-tune look like guide's
    on the signs of training length; on this encoder there was no accuracy gap for them to close."""
    from dgxperf.train.paired import compare_runs

    run = functools.partial(result_in, ENCODER_AB)
    folder = BENCH / ENCODER_AB
    to_optimized = compare_runs(folder / "optimized-s1-batch_size64", folder / "optimized-s1")
    to_guide = compare_runs(folder / "optimized-s1-batch_size64", folder / "guide-s1")
    assert (round(100 * to_optimized["difference"], 2), round(to_optimized["p_value"], 2)) == (0.06, 1.0)
    assert (round(100 * to_guide["difference"], 2), round(to_guide["p_value"], 2)) == (0.46, 0.39)
    batch_64, guide, optimized = run("optimized-s1-batch_size64"), run("guide-s1"), run("optimized-s1")
    first_dev = [round(100 * r["epochs"][0]["dev_accuracy"], 2) for r in (batch_64, guide, optimized)]
    assert first_dev == [84.97, 84.79, 82.2]
    assert [round(r["test"]["loss"], 3) for r in (batch_64, guide, optimized)] == [0.356, 0.36, 0.337]


def test_item_3_sqrt_lr_lands_either_side_of_optimized() -> None:
    """lr_scaling=sqrt against optimized of its seed: -0.06 (p = 1) and +0.75 (p = 0.105); predicted -0.3 to +0.2,
    held by the first and missed by the second. Two pairs say nothing yet about its mean."""
    from dgxperf.train.paired import compare_runs

    folder = BENCH / ENCODER_AB
    pairs = [
        compare_runs(folder / f"optimized-s{s}-lr_scalingsqrt", folder / f"optimized-s{s}") for s in (1, 2)
    ]
    assert [round(100 * p["difference"], 2) for p in pairs] == [-0.06, 0.75]
    assert [round(p["p_value"], 3) for p in pairs] == [1.0, 0.105]


def test_item_3_speed_predictions_hold_again_from_encoder_ab() -> None:
    """batch_size=64 8.8-9.1% slower than optimized-s1 epoch for epoch (1,379-1,385 samples/s; predicted 4-12% and
    1,330-1,440), 20.0 GB reserved (17-25); lr_scaling=sqrt within 0.4% of optimized in all six epochs (1%)."""
    run = functools.partial(result_in, ENCODER_AB)
    optimized, batch_64 = run("optimized-s1")["epochs"], run("optimized-s1-batch_size64")["epochs"]
    slower = [
        round(100 * (1 - b["samples_per_s"] / o["samples_per_s"]), 1)
        for o, b in zip(optimized, batch_64, strict=True)
    ]
    assert slower == [9.1, 8.8, 9.1]
    assert all(1330 < b["samples_per_s"] < 1440 for b in batch_64)
    assert round(batch_64[-1]["peak_reserved_bytes"] / 1e9, 1) == 20.0
    for seed in (1, 2):
        plain, sqrt = run(f"optimized-s{seed}")["epochs"], run(f"optimized-s{seed}-lr_scalingsqrt")["epochs"]
        assert all(
            abs(q["samples_per_s"] / p["samples_per_s"] - 1) < 0.005 for p, q in zip(plain, sqrt, strict=True)
        )


def test_ten_of_fourteen_hosts_give_under_3x_with_encoder_ab_host() -> None:
    """The README and PENDING.md: AB's host ran guide at 392-454 samples/s, optimized 3.58x it (median of six epoch
    pairs, all at 3x or more); with the item-3 speed host, ten of fourteen H100 hosts under 3x. bench launch read
    9.26 / 10.57 / 9.81 µs for an eager launch, as T's host (10.30, guide 425 samples/s, 3.47x)."""
    medians = host_median_ratios()
    medians["2026-12-07 item-3 speed host"] = round(
        statistics.median(speed_figures(ITEM3_SPEED, (1,), (1, 2))[1]), 2
    )
    medians["AB"] = round(statistics.median(speed_figures(ENCODER_AB, (1, 2), (1, 2, 3))[1]), 2)
    assert medians["AB"] == 3.58
    assert (len(medians), sum(m < 3 for m in medians.values())) == (14, 10)
    assert eager_launch_readings(ENCODER_AB, calls=3) == [9.258, 10.573, 9.813]


def advised_rules(recording: Path) -> dict[str, dict[str, Any]]:
    """What `dgxperf advise` suggests over a whole recording, by rule."""
    from dgxperf.monitor.sources import read_recording
    from tests.advise.test_real_recordings import fired

    header, samples, _ = read_recording(recording)
    return fired(header, samples)


def test_advise_names_guide_host_bound_on_encoder_ab_host() -> None:
    """`dgxperf advise` on AB's calls: launch.host_bound (warn) on calls 2 and 3, which hold the guide runs (the GPU
    ran kernels ~64-67% of the judged ticks with guide's process at one core), not on call 1 (pretraining and
    optimized alone); health.throttling (info) on all three. Over the encoder hosts' calls the rule splits them by
    guide's pace: it fired on a call of every host whose guide ran at a median of 513 samples/s or less (R's, T's,
    U's, W's, AB's) and on none whose guide ran at 518 or more (S's, V's, X's, Y's, Z's, AA's)."""
    rules = [advised_rules(BENCH / ENCODER_AB / f"monitor-seeds-call{call}.jsonl.gz") for call in (1, 2, 3)]
    assert [set(r) for r in rules] == [
        {"health.throttling"},
        {"launch.host_bound", "health.throttling"},
        {"launch.host_bound", "health.throttling"},
    ]
    for found in rules[1:]:
        values = found["launch.host_bound"]["evidence"]["values"]
        assert found["launch.host_bound"]["severity"] == "warn" and values["share_of_judged_ticks"] > 0.5
        assert 99 < values["process_cpu_pct_median"] < 102
    hosts = {**ENCODER_HOST_SEEDS, "AB": (ENCODER_AB, (1, 2))}
    fired = {
        host: any(
            "launch.host_bound" in advised_rules(call)
            for call in (BENCH / folder).glob("monitor-seeds-call*.gz")
        )
        for host, (folder, _) in hosts.items()
    }
    guide_pace = {
        host: statistics.median(speed_figures(folder, seeds, seeds)[2])
        for host, (folder, seeds) in hosts.items()
    }
    assert {host for host, named in fired.items() if named} == {"R", "T", "U", "W", "AB"}
    slowest_quiet = min(pace for host, pace in guide_pace.items() if not fired[host])
    assert max(pace for host, pace in guide_pace.items() if fired[host]) < 514 < 518 < slowest_quiet
