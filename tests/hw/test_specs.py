"""The datasheet table and the matching from NVML names.

The reference figures asserted here are NVIDIA datasheet facts (dense), so a change to one of them is a
change to what every efficiency figure in dgxperf means and must be deliberate.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle

import pytest

from dgxperf.hw.specs import DTYPES, GpuSpec, all_specs, get_spec, match_spec, peak_tflops

MIB = 2**20

# (name as NVML reports it, about what NVML reports as memory total in MiB, expected key)
REAL_NVML_NAMES = [
    ("NVIDIA H200", 143771, "h200-sxm"),
    ("NVIDIA H200 NVL", 143771, "h200-nvl"),
    ("NVIDIA H100 80GB HBM3", 81559, "h100-sxm"),
    ("NVIDIA H100 PCIe", 81559, "h100-pcie"),
    ("NVIDIA H100 NVL", 95830, "h100-nvl"),
    ("NVIDIA H800", 81559, "h800-sxm"),
    ("NVIDIA GH200 480GB", 97871, "gh200-96gb"),
    ("NVIDIA A100-SXM4-80GB", 81920, "a100-sxm4-80gb"),
    ("NVIDIA A100-SXM4-40GB", 40960, "a100-sxm4-40gb"),
    ("NVIDIA A100-PCIE-40GB", 40960, "a100-pcie-40gb"),
    ("NVIDIA A100 80GB PCIe", 81920, "a100-pcie-80gb"),
    ("NVIDIA A800-SXM4-80GB", 81920, "a800-sxm4-80gb"),
    ("NVIDIA A10", 23028, "a10"),
    ("NVIDIA A30", 24576, "a30"),
    ("Tesla V100-SXM2-32GB", 32510, "v100-sxm2-32gb"),
    ("Tesla V100-SXM2-16GB", 16160, "v100-sxm2-16gb"),
    ("Tesla V100-PCIE-16GB", 16160, "v100-pcie-16gb"),
    ("Tesla V100-PCIE-32GB", 32510, "v100-pcie-32gb"),
    ("Tesla V100S-PCIE-32GB", 32510, "v100s-pcie-32gb"),
    ("NVIDIA L40S", 46068, "l40s"),
    ("NVIDIA L40", 46068, "l40"),
    ("NVIDIA L4", 23034, "l4"),
]


@pytest.mark.parametrize(("name", "mib", "key"), REAL_NVML_NAMES)
def test_real_nvml_names_match_by_name_alone(name: str, mib: int, key: str) -> None:
    spec = match_spec(name)
    assert spec is not None
    assert spec.key == key


@pytest.mark.parametrize(("name", "mib", "key"), REAL_NVML_NAMES)
def test_real_nvml_names_match_with_their_memory_total(name: str, mib: int, key: str) -> None:
    spec = match_spec(name, mib * MIB)
    assert spec is not None
    assert spec.key == key


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("nvidia h100 80gb hbm3", "h100-sxm"),
        ("  NVIDIA   H100   PCIe  ", "h100-pcie"),
        ("NVIDIA_A100_SXM4_80GB", "a100-sxm4-80gb"),
        ("A100-SXM-80GB", "a100-sxm4-80gb"),
        ("NVIDIA A100 80 GB PCIe", "a100-pcie-80gb"),
        ("NVIDIA Tesla V100-SXM2-32GB", "v100-sxm2-32gb"),
        ("NVIDIA H100 SXM5 80GB", "h100-sxm"),
        ("NVIDIA H100", "h100-sxm"),
        ("NVIDIA H800 80GB HBM3", "h800-sxm"),
        ("NVIDIA A800 80GB PCIe", "a800-pcie-80gb"),
        ("NVIDIA GH200 120GB", "gh200-96gb"),
        ("NVIDIA GH200 144G HBM3e", "gh200-144gb"),
        ("NVIDIA L40S PCIe", "l40s"),
    ],
)
def test_spelling_variants(name: str, key: str) -> None:
    spec = match_spec(name)
    assert spec is not None
    assert spec.key == key


# --- memory-size disambiguation ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "mib", "key"),
    [
        ("NVIDIA A100-SXM4", 81920, "a100-sxm4-80gb"),
        ("NVIDIA A100-SXM4", 40960, "a100-sxm4-40gb"),
        ("NVIDIA A100 PCIe", 81920, "a100-pcie-80gb"),
        ("NVIDIA A100 PCIe", 40536, "a100-pcie-40gb"),
        ("Tesla V100-SXM2", 32510, "v100-sxm2-32gb"),
        ("Tesla V100-SXM2", 16160, "v100-sxm2-16gb"),
        ("NVIDIA GH200", 97871, "gh200-96gb"),
        ("NVIDIA GH200 480GB", 146000, "gh200-144gb"),
    ],
)
def test_memory_total_picks_the_variant_the_name_leaves_open(name: str, mib: int, key: str) -> None:
    spec = match_spec(name, mib * MIB)
    assert spec is not None
    assert spec.key == key


def test_without_memory_an_ambiguous_ampere_name_is_none() -> None:
    # no A100 name from NVML omits the board and size, so neither is assumed
    assert match_spec("NVIDIA A100-SXM4") is None
    assert match_spec("NVIDIA A100") is None
    assert match_spec("Tesla V100-SXM2") is None


def test_both_variants_of_one_size_stay_ambiguous_for_ampere() -> None:
    assert match_spec("NVIDIA A100", 81920 * MIB) is None


def test_a_memory_total_that_fits_no_variant_does_not_pick_one() -> None:
    # a MIG slice's 10 GiB says nothing about the board
    assert match_spec("NVIDIA A100-SXM4", 10240 * MIB) is None
    # ...and does not override what a plain Hopper name means
    spec = match_spec("NVIDIA H200", 18 * 1024 * MIB)
    assert spec is not None
    assert spec.key == "h200-sxm"


def test_memory_size_in_the_name_wins_over_memory_total() -> None:
    spec = match_spec("NVIDIA A100-SXM4-40GB", 81920 * MIB)
    assert spec is not None
    assert spec.key == "a100-sxm4-40gb"


def test_memory_size_in_the_name_that_the_table_lacks_is_none() -> None:
    assert match_spec("NVIDIA A100-SXM4-64GB") is None
    assert match_spec("NVIDIA H100 96GB HBM3") is None
    assert match_spec("NVIDIA A800-SXM4-40GB") is None


@pytest.mark.parametrize("mib", [None, 0, -1])
def test_missing_or_nonsense_memory_total_is_ignored(mib: int | None) -> None:
    spec = match_spec("NVIDIA H200", None if mib is None else mib * MIB)
    assert spec is not None
    assert spec.key == "h200-sxm"


# --- whole-word model traps --------------------------------------------------------------------------------


def test_l4_l40_l40s_never_match_each_other() -> None:
    names = ("NVIDIA L4", "NVIDIA L40", "NVIDIA L40S")
    keys = {name: getattr(match_spec(name), "key", None) for name in names}
    assert keys == {"NVIDIA L4": "l4", "NVIDIA L40": "l40", "NVIDIA L40S": "l40s"}
    assert match_spec("NVIDIA L40G") is None
    assert match_spec("NVIDIA L4S") is None


def test_a10_and_a100_never_match_each_other_or_a1000() -> None:
    spec = match_spec("NVIDIA A10")
    assert spec is not None
    assert spec.key == "a10"
    a100 = match_spec("NVIDIA A100-SXM4-80GB")
    assert a100 is not None
    assert a100.key.startswith("a100")
    assert match_spec("NVIDIA A1000") is None
    assert match_spec("NVIDIA RTX A1000") is None
    assert match_spec("NVIDIA A10G") is None
    assert match_spec("NVIDIA A100X") is None


def test_h100_never_matches_longer_model_numbers() -> None:
    assert match_spec("NVIDIA H1000") is None
    assert match_spec("NVIDIA H100X") is None
    assert match_spec("NVIDIA H20") is None


@pytest.mark.parametrize(
    "name",
    [
        "NVIDIA GeForce RTX 4090",
        "Quadro RTX 8000",
        "NVIDIA RTX A6000",
        "Tesla T4",
        "NVIDIA B200",
        "Tesla V100-SXM3-32GB",
        "Tesla V100-FHHL-16GB",
        "NVIDIA A800 40GB Active",
        "NVIDIA H100 80GB HBM3 MIG 1g.10gb",
        "NVIDIA A100-SXM4-80GB MIG 7g.80gb",
        "Tesla V100-SXM2-32GB-LS",
        "Tesla V100-SXM3-32GB-H",
        "NVIDIA H100 PCIe NVL",
        "NVIDIA",
        "Tesla",
        "",
        "   ",
    ],
)
def test_unknown_gpus_are_none(name: str) -> None:
    assert match_spec(name) is None
    assert match_spec(name, 81920 * MIB) is None


# --- the datasheet figures ---------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["a100-sxm4-40gb", "a100-sxm4-80gb", "a100-pcie-40gb", "a100-pcie-80gb"])
def test_a100_dense_peaks(key: str) -> None:
    tflops = get_spec(key).tflops
    assert tflops["bf16"] == pytest.approx(312)
    assert tflops["fp16"] == pytest.approx(312)
    assert tflops["tf32"] == pytest.approx(156)
    assert tflops["fp32"] == pytest.approx(19.5)
    assert tflops["fp64"] == pytest.approx(9.7)
    assert tflops["fp64_tensor"] == pytest.approx(19.5)
    assert tflops["int8"] == pytest.approx(624)
    assert "fp8" not in tflops


@pytest.mark.parametrize("key", ["h100-sxm", "h200-sxm", "gh200-96gb", "gh200-144gb"])
def test_hopper_sxm_dense_peaks(key: str) -> None:
    tflops = get_spec(key).tflops
    assert tflops["bf16"] == pytest.approx(989.4, abs=0.2)
    assert tflops["fp16"] == pytest.approx(989.4, abs=0.2)
    assert tflops["tf32"] == pytest.approx(494.6, abs=0.2)
    assert tflops["fp8"] == pytest.approx(1979, abs=0.5)
    assert tflops["int8"] == pytest.approx(1979, abs=0.5)
    assert tflops["fp32"] == pytest.approx(67)
    assert tflops["fp64"] == pytest.approx(34)
    assert tflops["fp64_tensor"] == pytest.approx(67)


def test_hopper_pcie_and_nvl_dense_peaks() -> None:
    assert get_spec("h100-pcie").tflops["bf16"] == pytest.approx(756.5)
    assert get_spec("h100-nvl").tflops["bf16"] == pytest.approx(835.5)
    assert get_spec("h200-nvl").tflops["bf16"] == pytest.approx(835.5)


def test_h800_keeps_h100_tensor_peaks_but_not_fp64() -> None:
    h800, h100 = get_spec("h800-sxm"), get_spec("h100-sxm")
    for dtype in ("tf32", "bf16", "fp16", "fp8", "int8", "fp32"):
        assert h800.tflops[dtype] == h100.tflops[dtype]
    assert h800.tflops["fp64"] < 2
    assert h800.nvlink_bandwidth_gbs == 400


def test_a800_is_a100_compute_with_400_gbs_nvlink() -> None:
    assert get_spec("a800-sxm4-80gb").tflops == get_spec("a100-sxm4-80gb").tflops
    assert get_spec("a800-sxm4-80gb").nvlink_bandwidth_gbs == 400
    assert get_spec("a800-pcie-80gb").nvlink_bandwidth_gbs == 400


@pytest.mark.parametrize(
    ("key", "gbs"),
    [
        ("a100-sxm4-40gb", 1555),
        ("a100-pcie-40gb", 1555),
        ("a100-sxm4-80gb", 2039),
        ("a100-pcie-80gb", 1935),
        ("h100-sxm", 3350),
        ("h100-pcie", 2000),
        ("h100-nvl", 3900),
        ("h200-sxm", 4800),
        ("h200-nvl", 4800),
        ("v100-sxm2-32gb", 900),
        ("l40s", 864),
        ("l4", 300),
    ],
)
def test_memory_bandwidth(key: str, gbs: float) -> None:
    assert get_spec(key).hbm_bandwidth_gbs == gbs


@pytest.mark.parametrize(
    ("key", "gbs"),
    [
        ("a100-sxm4-40gb", 600),
        ("a100-sxm4-80gb", 600),
        ("h100-sxm", 900),
        ("h200-sxm", 900),
        ("h100-pcie", 600),
        ("h100-nvl", 600),
        ("v100-sxm2-16gb", 300),
        ("v100-pcie-16gb", 0),
        ("l40s", 0),
        ("l4", 0),
    ],
)
def test_nvlink_bandwidth(key: str, gbs: float) -> None:
    assert get_spec(key).nvlink_bandwidth_gbs == gbs


@pytest.mark.parametrize(
    ("key", "gen"),
    [
        ("v100-sxm2-32gb", 3),
        ("v100s-pcie-32gb", 3),
        ("a100-sxm4-80gb", 4),
        ("a100-pcie-40gb", 4),
        ("h100-sxm", 5),
        ("h100-pcie", 5),
        ("h200-sxm", 5),
        ("h200-nvl", 5),
        ("l40s", 4),
        ("l4", 4),
    ],
)
def test_pcie_generation(key: str, gen: int) -> None:
    assert get_spec(key).pcie_gen == gen


@pytest.mark.parametrize(
    ("key", "gb"),
    [
        ("v100-sxm2-16gb", 16),
        ("v100-sxm2-32gb", 32),
        ("v100-pcie-16gb", 16),
        ("v100-pcie-32gb", 32),
        ("a100-sxm4-40gb", 40),
        ("a100-pcie-80gb", 80),
        ("h100-nvl", 94),
        ("h200-sxm", 141),
        ("h200-nvl", 141),
        ("l40s", 48),
        ("l4", 24),
    ],
)
def test_marketed_memory(key: str, gb: float) -> None:
    assert get_spec(key).memory_gb == gb


def test_volta_has_no_bf16_tf32_fp8_or_int8_tensor_cores() -> None:
    for spec in all_specs():
        if spec.architecture == "volta":
            assert {"bf16", "tf32", "fp8", "int8", "fp64_tensor"}.isdisjoint(spec.tflops)
            assert spec.tflops["fp16"] > spec.tflops["fp32"]


# --- internal consistency over the whole table -------------------------------------------------------------

SPECS = all_specs()
IDS = [spec.key for spec in SPECS]


def test_keys_are_unique_and_lowercase() -> None:
    assert len(IDS) == len(set(IDS))
    assert all(key == key.lower() and " " not in key for key in IDS)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_every_number_is_positive(spec: GpuSpec) -> None:
    for name in ("memory_gb", "hbm_bandwidth_gbs", "tdp_w", "sm_count", "l2_mb", "pcie_gen"):
        assert getattr(spec, name) > 0, name
    assert spec.pcie_lanes == 16
    assert spec.nvlink_bandwidth_gbs >= 0
    assert spec.tflops
    assert set(spec.tflops) <= set(DTYPES)
    assert all(value > 0 for value in spec.tflops.values())
    assert "fp32" in spec.tflops and "fp16" in spec.tflops
    assert spec.source.startswith("NVIDIA")


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_tensor_peaks_are_ordered(spec: GpuSpec) -> None:
    tflops = spec.tflops
    if "bf16" in tflops and "tf32" in tflops:
        assert tflops["bf16"] >= tflops["tf32"]
    if "bf16" in tflops:
        assert tflops["bf16"] == tflops["fp16"]
        assert tflops["bf16"] > tflops["fp32"]
    if "tf32" in tflops:
        assert tflops["tf32"] >= tflops["fp32"]
    if "fp64_tensor" in tflops:
        assert tflops["fp64_tensor"] >= tflops["fp64"]


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_fp8_is_twice_bf16_on_hopper_and_ada(spec: GpuSpec) -> None:
    if spec.architecture in ("hopper", "ada"):
        assert spec.tflops["fp8"] == pytest.approx(2 * spec.tflops["bf16"], rel=5e-3)
        assert spec.tflops["int8"] == pytest.approx(spec.tflops["fp8"], rel=5e-3)
    else:
        assert "fp8" not in spec.tflops


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_mig_instances(spec: GpuSpec) -> None:
    if not spec.mig:
        assert spec.mig_max_instances == 0
    elif spec.key.startswith("a30"):
        assert spec.mig_max_instances == 4
    else:
        assert spec.mig_max_instances == 7
    model = spec.key.split("-")[0]
    supports_mig = model in {"a100", "a800", "a30", "h100", "h200", "h800", "gh200"}
    assert spec.mig == supports_mig


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_compute_capability_matches_architecture(spec: GpuSpec) -> None:
    expected = {"volta": {(7, 0)}, "ampere": {(8, 0), (8, 6)}, "ada": {(8, 9)}, "hopper": {(9, 0)}}
    assert spec.compute_capability in expected[spec.architecture]


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_memory_type_fits_the_board(spec: GpuSpec) -> None:
    if spec.memory_type == "GDDR6":
        assert spec.form_factor == "pcie"
        assert spec.hbm_bandwidth_gbs < 1000
    else:
        assert spec.memory_type.startswith("HBM")


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_every_spec_is_found_again_from_its_own_name(spec: GpuSpec) -> None:
    # the table's marketing names are NVML-like enough to round-trip, which guards the matching rules
    # against a new entry that no name could ever reach
    name = spec.name.split(" (")[0].replace("Grace Hopper Superchip", "")
    found = match_spec(name, int(spec.memory_gb * 0.98 * 2**30))
    assert found is spec


# --- peak_tflops, all_specs, get_spec ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("aliases", "canonical"),
    [
        (("fp16", "half", "float16", "FP16", "torch.float16"), "fp16"),
        (("bf16", "bfloat16", "torch.bfloat16", " BF16 "), "bf16"),
        (("fp32", "float32", "float"), "fp32"),
        (("tf32",), "tf32"),
        (("fp64", "float64", "double"), "fp64"),
        (("fp8", "float8", "float8_e4m3fn", "float8_e5m2"), "fp8"),
        (("int8",), "int8"),
    ],
)
def test_peak_tflops_aliases(aliases: tuple[str, ...], canonical: str) -> None:
    spec = get_spec("h100-sxm")
    for alias in aliases:
        assert peak_tflops(spec, alias) == spec.tflops[canonical], alias


def test_peak_tflops_unsupported_is_none() -> None:
    v100 = get_spec("v100-sxm2-32gb")
    assert peak_tflops(v100, "bf16") is None
    assert peak_tflops(v100, "fp8") is None
    assert peak_tflops(v100, "tf32") is None
    assert peak_tflops(get_spec("a100-sxm4-80gb"), "fp8") is None
    assert peak_tflops(get_spec("l40s"), "fp64") is None
    assert peak_tflops(get_spec("h100-sxm"), "fp4") is None
    assert peak_tflops(get_spec("h100-sxm"), "") is None


def test_peak_tflops_values() -> None:
    assert peak_tflops(get_spec("a100-sxm4-80gb"), "bfloat16") == pytest.approx(312)
    assert peak_tflops(get_spec("v100-sxm2-16gb"), "half") == pytest.approx(125)


def test_all_specs_covers_the_required_models() -> None:
    keys = {spec.key for spec in all_specs()}
    assert isinstance(all_specs(), tuple)
    assert {
        "v100-sxm2-16gb", "v100-sxm2-32gb", "v100-pcie-16gb", "v100-pcie-32gb",
        "a100-sxm4-40gb", "a100-sxm4-80gb", "a100-pcie-40gb", "a100-pcie-80gb",
        "h100-sxm", "h100-pcie", "h100-nvl", "h200-sxm", "h200-nvl", "l40s", "l4",
    } <= keys  # fmt: skip


def test_get_spec_returns_the_entry() -> None:
    spec = get_spec("h100-sxm")
    assert spec.key == "h100-sxm"
    assert spec.form_factor == "sxm"
    assert spec.architecture == "hopper"


def test_get_spec_unknown_key_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="h100-sxm") as excinfo:
        get_spec("h100")
    assert "'h100'" in str(excinfo.value)


# --- the dataclass -----------------------------------------------------------------------------------------


def test_spec_is_frozen_hashable_and_its_peaks_read_only() -> None:
    spec = get_spec("h200-sxm")
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.tdp_w = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.tflops["bf16"] = 1.0  # type: ignore[index]
    assert {spec: 1}[spec] == 1


def test_spec_survives_pickle_deepcopy_and_asdict() -> None:
    # benchmark workers receive specs in other processes
    spec = get_spec("h100-sxm")
    assert pickle.loads(pickle.dumps(spec)) == spec
    assert copy.deepcopy(spec) == spec
    assert dict(dataclasses.asdict(spec)["tflops"]) == dict(spec.tflops)


def test_spec_to_json_is_plain_json() -> None:
    spec = get_spec("a100-sxm4-80gb")
    data = json.loads(json.dumps(spec.to_json()))
    assert data["key"] == "a100-sxm4-80gb"
    assert data["compute_capability"] == [8, 0]
    assert data["tflops"]["bf16"] == 312


def test_spec_rejects_unknown_dtype() -> None:
    fields = get_spec("l4").to_json()
    fields["compute_capability"] = tuple(fields["compute_capability"])
    fields["tflops"] = {"fp32": 1.0, "bfloat16": 2.0}
    with pytest.raises(ValueError, match="bfloat16"):
        GpuSpec(**fields)
