"""NVIDIA datasheet peaks per GPU model: the physical limits every dgxperf measurement is compared with.

Figures
    Every figure is a peak as printed on NVIDIA's datasheet for the board (``source`` names it). Compute
    peaks are DENSE TFLOP/s (TOPS for ``int8``). Datasheets for Ampere, Hopper and Ada print tensor-core
    figures "with sparsity" (2:4 structured sparsity, twice the dense rate); where a datasheet prints only
    that figure (or, on the L40S, a dense figure its own sparse column contradicts), the table holds half of
    it, and :func:`_dense_from_sparse` keeps the printed number visible in the code. A training step is
    dense matrix multiplication, so MFU and GEMM efficiency against a sparse peak would read half of what
    they are. A dtype is absent from ``GpuSpec.tflops`` when the tensor cores
    do not support it (no ``bf16``/``tf32``/``fp8``/``int8`` on V100, no ``fp8`` on Ampere) or when the
    datasheet gives no figure (FP64 on the GDDR6 boards A10/L4/L40/L40S, which run it at 1/64 rate).
    Bandwidths are decimal GB/s: ``hbm_bandwidth_gbs`` is the device memory's (GDDR6 on the A10 and Ada
    boards), ``nvlink_bandwidth_gbs`` the total bidirectional NVLink bandwidth of one GPU (with the optional
    bridge fitted, for PCIe boards) and 0 where the board has no NVLink.

Matching
    :func:`match_spec` takes the product name NVML reports (``nvmlDeviceGetName``). It upper-cases the name,
    turns ``-``/``_`` into spaces, drops the ``NVIDIA``/``Tesla`` prefixes, and reads the first word as the
    model ("A100", "V100S", "L40S", "GH200"); models are compared as whole words, so "L4" never matches
    "L40"/"L40S" and "A10" never matches "A100"/"A1000". The remaining words may only be a board (``SXM``,
    ``SXM2``/``4``/``5``, ``PCIe``, ``NVL``), a memory size (``80GB``, ``144G``) or a memory type (``HBM3``,
    ``HBM3e``), each of which narrows the model's variants. When the name leaves more than one variant,
    ``memory_total_bytes`` (NVML's total, a little below the marketed size) picks the closest memory size.
    When that does not decide either, a Hopper name without a board word means the SXM part, because NVML
    spells out ``PCIe`` and ``NVL`` for the others ("NVIDIA H200", "NVIDIA H100 80GB HBM3").

Unknown GPUs
    Any other word in the name (a board or size the table does not know, "GeForce", "RTX", ...) or a name
    that stays ambiguous gives ``None``. A wrong peak is worse than none: it makes every efficiency figure
    built on it silently wrong, so callers must handle ``None`` and say that no datasheet peak is known.
"""

from __future__ import annotations

import dataclasses
import re
import types
from collections.abc import Iterator, Mapping
from typing import Any

DTYPES: tuple[str, ...] = ("fp64", "fp64_tensor", "fp32", "tf32", "bf16", "fp16", "fp8", "int8")
ARCHITECTURES: tuple[str, ...] = ("volta", "ampere", "hopper", "ada")
FORM_FACTORS: tuple[str, ...] = ("sxm", "pcie", "nvl")
MEMORY_TYPES: tuple[str, ...] = ("HBM2", "HBM2e", "HBM3", "HBM3e", "GDDR6")


class _Peaks(Mapping[str, float]):
    """Read-only dtype -> TFLOP/s. Unlike a ``MappingProxyType`` it pickles and deep-copies, so a spec can
    travel to a benchmark worker process or through ``dataclasses.asdict``."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, float]) -> None:
        self._data = dict(data)

    def __getitem__(self, dtype: str) -> float:
        return self._data[dtype]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return repr(self._data)


@dataclasses.dataclass(frozen=True)
class GpuSpec:
    """One GPU board's datasheet peaks. All figures are dense peaks (see the module docstring)."""

    key: str
    name: str
    architecture: str
    compute_capability: tuple[int, int]
    form_factor: str
    memory_gb: float
    memory_type: str
    hbm_bandwidth_gbs: float
    nvlink_bandwidth_gbs: float
    pcie_gen: int
    pcie_lanes: int
    tdp_w: float
    sm_count: int
    l2_mb: float
    mig: bool
    mig_max_instances: int
    tflops: Mapping[str, float] = dataclasses.field(hash=False)
    source: str

    def __post_init__(self) -> None:
        unknown = sorted(set(self.tflops) - set(DTYPES))
        if unknown:
            raise ValueError(f"{self.key}: unknown dtype(s) {unknown}; known: {', '.join(DTYPES)}")
        if self.architecture not in ARCHITECTURES:
            raise ValueError(f"{self.key}: unknown architecture {self.architecture!r}")
        if self.form_factor not in FORM_FACTORS:
            raise ValueError(f"{self.key}: unknown form factor {self.form_factor!r}")
        if self.memory_type not in MEMORY_TYPES:
            raise ValueError(f"{self.key}: unknown memory type {self.memory_type!r}")
        # The table is shared by every caller in the process: a read-only view stops one caller from
        # changing the peaks another one measures against.
        object.__setattr__(self, "tflops", _Peaks(self.tflops))

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["compute_capability"] = list(self.compute_capability)
        out["tflops"] = dict(self.tflops)
        return out


def _dense_from_sparse(**with_sparsity: float) -> dict[str, float]:
    """Dense peaks from datasheet figures printed only "with sparsity" (which doubles the dense rate)."""
    return {dtype: value / 2 for dtype, value in with_sparsity.items()}


# fmt: off
# --- compute columns shared by boards of one silicon and clock -------------------------------------------

_V100_SXM2_TFLOPS = {"fp64": 7.8, "fp32": 15.7, "fp16": 125.0}
_V100_PCIE_TFLOPS = {"fp64": 7.0, "fp32": 14.0, "fp16": 112.0}
_V100S_PCIE_TFLOPS = {"fp64": 8.2, "fp32": 16.4, "fp16": 130.0}

# A100 datasheets print dense | sparse columns; these are the dense ones (SXM and PCIe are the same).
_A100_TFLOPS = {
    "fp64": 9.7, "fp64_tensor": 19.5, "fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0,
    "int8": 624.0,
}

_H100_SXM_TFLOPS = {
    "fp64": 34.0, "fp64_tensor": 67.0, "fp32": 67.0,
    **_dense_from_sparse(tf32=989, bf16=1979, fp16=1979, fp8=3958, int8=3958),
}
_H100_PCIE_TFLOPS = {
    "fp64": 26.0, "fp64_tensor": 51.0, "fp32": 51.0,
    **_dense_from_sparse(tf32=756, bf16=1513, fp16=1513, fp8=3026, int8=3026),
}
# H100 NVL and H200 NVL run the same silicon at a lower power cap (400 W / 600 W) and share these clocks.
_HOPPER_NVL_TFLOPS = {
    "fp64": 30.0, "fp64_tensor": 60.0, "fp32": 60.0,
    **_dense_from_sparse(tf32=835, bf16=1671, fp16=1671, fp8=3341, int8=3341),
}
# The export-control cut of the H800 removed FP64 (1 TFLOPS, vector and tensor alike) and NVLink bandwidth;
# the low-precision tensor cores are the H100 SXM's.
_H800_SXM_TFLOPS = {**_H100_SXM_TFLOPS, "fp64": 1.0, "fp64_tensor": 1.0}

# fmt: on

_AMPERE_A100 = "NVIDIA A100 Tensor Core GPU datasheet"
_HOPPER_H100 = "NVIDIA H100 Tensor Core GPU datasheet"


@dataclasses.dataclass(frozen=True)
class _Entry:
    model: str  # the first word of the NVML name once prefixes are gone: "A100", "V100S", "GH200"
    spec: GpuSpec


# fmt: off
_ENTRIES: tuple[_Entry, ...] = (
    # --- Volta --------------------------------------------------------------------------------------------
    _Entry("V100", GpuSpec(
        key="v100-sxm2-16gb", name="NVIDIA Tesla V100 SXM2 16GB", architecture="volta",
        compute_capability=(7, 0), form_factor="sxm", memory_gb=16, memory_type="HBM2",
        hbm_bandwidth_gbs=900, nvlink_bandwidth_gbs=300, pcie_gen=3, pcie_lanes=16, tdp_w=300,
        sm_count=80, l2_mb=6, mig=False, mig_max_instances=0, tflops=_V100_SXM2_TFLOPS,
        source="NVIDIA Tesla V100 GPU datasheet (V100 for NVLink column)",
    )),
    _Entry("V100", GpuSpec(
        key="v100-sxm2-32gb", name="NVIDIA Tesla V100 SXM2 32GB", architecture="volta",
        compute_capability=(7, 0), form_factor="sxm", memory_gb=32, memory_type="HBM2",
        hbm_bandwidth_gbs=900, nvlink_bandwidth_gbs=300, pcie_gen=3, pcie_lanes=16, tdp_w=300,
        sm_count=80, l2_mb=6, mig=False, mig_max_instances=0, tflops=_V100_SXM2_TFLOPS,
        source="NVIDIA Tesla V100 GPU datasheet (V100 for NVLink column)",
    )),
    _Entry("V100", GpuSpec(
        key="v100-pcie-16gb", name="NVIDIA Tesla V100 PCIe 16GB", architecture="volta",
        compute_capability=(7, 0), form_factor="pcie", memory_gb=16, memory_type="HBM2",
        hbm_bandwidth_gbs=900, nvlink_bandwidth_gbs=0, pcie_gen=3, pcie_lanes=16, tdp_w=250,
        sm_count=80, l2_mb=6, mig=False, mig_max_instances=0, tflops=_V100_PCIE_TFLOPS,
        source="NVIDIA Tesla V100 GPU datasheet (V100 for PCIe column)",
    )),
    _Entry("V100", GpuSpec(
        key="v100-pcie-32gb", name="NVIDIA Tesla V100 PCIe 32GB", architecture="volta",
        compute_capability=(7, 0), form_factor="pcie", memory_gb=32, memory_type="HBM2",
        hbm_bandwidth_gbs=900, nvlink_bandwidth_gbs=0, pcie_gen=3, pcie_lanes=16, tdp_w=250,
        sm_count=80, l2_mb=6, mig=False, mig_max_instances=0, tflops=_V100_PCIE_TFLOPS,
        source="NVIDIA Tesla V100 GPU datasheet (V100 for PCIe column)",
    )),
    _Entry("V100S", GpuSpec(
        key="v100s-pcie-32gb", name="NVIDIA Tesla V100S PCIe 32GB", architecture="volta",
        compute_capability=(7, 0), form_factor="pcie", memory_gb=32, memory_type="HBM2",
        hbm_bandwidth_gbs=1134, nvlink_bandwidth_gbs=0, pcie_gen=3, pcie_lanes=16, tdp_w=250,
        sm_count=80, l2_mb=6, mig=False, mig_max_instances=0, tflops=_V100S_PCIE_TFLOPS,
        source="NVIDIA V100 Tensor Core GPU datasheet (V100S for PCIe column)",
    )),
    # --- Ampere -------------------------------------------------------------------------------------------
    _Entry("A100", GpuSpec(
        key="a100-sxm4-40gb", name="NVIDIA A100 SXM4 40GB", architecture="ampere",
        compute_capability=(8, 0), form_factor="sxm", memory_gb=40, memory_type="HBM2",
        hbm_bandwidth_gbs=1555, nvlink_bandwidth_gbs=600, pcie_gen=4, pcie_lanes=16, tdp_w=400,
        sm_count=108, l2_mb=40, mig=True, mig_max_instances=7, tflops=_A100_TFLOPS,
        source=f"{_AMPERE_A100} (A100 40GB SXM column)",
    )),
    _Entry("A100", GpuSpec(
        key="a100-sxm4-80gb", name="NVIDIA A100 SXM4 80GB", architecture="ampere",
        compute_capability=(8, 0), form_factor="sxm", memory_gb=80, memory_type="HBM2e",
        hbm_bandwidth_gbs=2039, nvlink_bandwidth_gbs=600, pcie_gen=4, pcie_lanes=16, tdp_w=400,
        sm_count=108, l2_mb=40, mig=True, mig_max_instances=7, tflops=_A100_TFLOPS,
        source=f"{_AMPERE_A100} (A100 80GB SXM column)",
    )),
    _Entry("A100", GpuSpec(
        key="a100-pcie-40gb", name="NVIDIA A100 PCIe 40GB", architecture="ampere",
        compute_capability=(8, 0), form_factor="pcie", memory_gb=40, memory_type="HBM2",
        hbm_bandwidth_gbs=1555, nvlink_bandwidth_gbs=600, pcie_gen=4, pcie_lanes=16, tdp_w=250,
        sm_count=108, l2_mb=40, mig=True, mig_max_instances=7, tflops=_A100_TFLOPS,
        source=f"{_AMPERE_A100} (A100 40GB PCIe column; NVLink via the 2-GPU bridge)",
    )),
    _Entry("A100", GpuSpec(
        key="a100-pcie-80gb", name="NVIDIA A100 PCIe 80GB", architecture="ampere",
        compute_capability=(8, 0), form_factor="pcie", memory_gb=80, memory_type="HBM2e",
        hbm_bandwidth_gbs=1935, nvlink_bandwidth_gbs=600, pcie_gen=4, pcie_lanes=16, tdp_w=300,
        sm_count=108, l2_mb=40, mig=True, mig_max_instances=7, tflops=_A100_TFLOPS,
        source=f"{_AMPERE_A100} (A100 80GB PCIe column; NVLink via the 2-GPU bridge)",
    )),
    _Entry("A800", GpuSpec(
        key="a800-sxm4-80gb", name="NVIDIA A800 SXM4 80GB", architecture="ampere",
        compute_capability=(8, 0), form_factor="sxm", memory_gb=80, memory_type="HBM2e",
        hbm_bandwidth_gbs=2039, nvlink_bandwidth_gbs=400, pcie_gen=4, pcie_lanes=16, tdp_w=400,
        sm_count=108, l2_mb=40, mig=True, mig_max_instances=7, tflops=_A100_TFLOPS,
        source="NVIDIA A800 Tensor Core GPU datasheet (A100 80GB SXM compute, NVLink 400 GB/s)",
    )),
    _Entry("A800", GpuSpec(
        key="a800-pcie-80gb", name="NVIDIA A800 PCIe 80GB", architecture="ampere",
        compute_capability=(8, 0), form_factor="pcie", memory_gb=80, memory_type="HBM2e",
        hbm_bandwidth_gbs=1935, nvlink_bandwidth_gbs=400, pcie_gen=4, pcie_lanes=16, tdp_w=300,
        sm_count=108, l2_mb=40, mig=True, mig_max_instances=7, tflops=_A100_TFLOPS,
        source="NVIDIA A800 Tensor Core GPU datasheet (A100 80GB PCIe compute, NVLink bridge 400 GB/s)",
    )),
    _Entry("A30", GpuSpec(
        key="a30", name="NVIDIA A30 24GB", architecture="ampere",
        compute_capability=(8, 0), form_factor="pcie", memory_gb=24, memory_type="HBM2",
        hbm_bandwidth_gbs=933, nvlink_bandwidth_gbs=200, pcie_gen=4, pcie_lanes=16, tdp_w=165,
        sm_count=56, l2_mb=24, mig=True, mig_max_instances=4,
        tflops={
            "fp64": 5.2, "fp64_tensor": 10.3, "fp32": 10.3, "tf32": 82.0, "bf16": 165.0, "fp16": 165.0,
            "int8": 330.0,
        },
        source="NVIDIA A30 Tensor Core GPU datasheet (dense column; NVLink via the 2-GPU bridge)",
    )),
    _Entry("A10", GpuSpec(
        key="a10", name="NVIDIA A10 24GB", architecture="ampere",
        compute_capability=(8, 6), form_factor="pcie", memory_gb=24, memory_type="GDDR6",
        hbm_bandwidth_gbs=600, nvlink_bandwidth_gbs=0, pcie_gen=4, pcie_lanes=16, tdp_w=150,
        sm_count=72, l2_mb=6, mig=False, mig_max_instances=0,
        tflops={"fp32": 31.2, "tf32": 62.5, "bf16": 125.0, "fp16": 125.0, "int8": 250.0},
        source="NVIDIA A10 Tensor Core GPU datasheet (dense column)",
    )),
    # --- Hopper -------------------------------------------------------------------------------------------
    _Entry("H100", GpuSpec(
        key="h100-sxm", name="NVIDIA H100 SXM5 80GB", architecture="hopper",
        compute_capability=(9, 0), form_factor="sxm", memory_gb=80, memory_type="HBM3",
        hbm_bandwidth_gbs=3350, nvlink_bandwidth_gbs=900, pcie_gen=5, pcie_lanes=16, tdp_w=700,
        sm_count=132, l2_mb=50, mig=True, mig_max_instances=7, tflops=_H100_SXM_TFLOPS,
        source=f"{_HOPPER_H100} (H100 SXM column; sparse tensor figures halved)",
    )),
    _Entry("H100", GpuSpec(
        key="h100-pcie", name="NVIDIA H100 PCIe 80GB", architecture="hopper",
        compute_capability=(9, 0), form_factor="pcie", memory_gb=80, memory_type="HBM2e",
        hbm_bandwidth_gbs=2000, nvlink_bandwidth_gbs=600, pcie_gen=5, pcie_lanes=16, tdp_w=350,
        sm_count=114, l2_mb=50, mig=True, mig_max_instances=7, tflops=_H100_PCIE_TFLOPS,
        source=f"{_HOPPER_H100} (2022 edition, H100 PCIe column; sparse tensor figures halved; "
        "NVLink via the 2-GPU bridge)",
    )),
    _Entry("H100", GpuSpec(
        key="h100-nvl", name="NVIDIA H100 NVL 94GB", architecture="hopper",
        compute_capability=(9, 0), form_factor="nvl", memory_gb=94, memory_type="HBM3",
        hbm_bandwidth_gbs=3900, nvlink_bandwidth_gbs=600, pcie_gen=5, pcie_lanes=16, tdp_w=400,
        sm_count=132, l2_mb=50, mig=True, mig_max_instances=7, tflops=_HOPPER_NVL_TFLOPS,
        source=f"{_HOPPER_H100} (H100 NVL column, per GPU; sparse tensor figures halved)",
    )),
    _Entry("H200", GpuSpec(
        key="h200-sxm", name="NVIDIA H200 SXM 141GB", architecture="hopper",
        compute_capability=(9, 0), form_factor="sxm", memory_gb=141, memory_type="HBM3e",
        hbm_bandwidth_gbs=4800, nvlink_bandwidth_gbs=900, pcie_gen=5, pcie_lanes=16, tdp_w=700,
        sm_count=132, l2_mb=50, mig=True, mig_max_instances=7, tflops=_H100_SXM_TFLOPS,
        source="NVIDIA H200 Tensor Core GPU datasheet (H200 SXM column; sparse tensor figures halved)",
    )),
    _Entry("H200", GpuSpec(
        key="h200-nvl", name="NVIDIA H200 NVL 141GB", architecture="hopper",
        compute_capability=(9, 0), form_factor="nvl", memory_gb=141, memory_type="HBM3e",
        hbm_bandwidth_gbs=4800, nvlink_bandwidth_gbs=900, pcie_gen=5, pcie_lanes=16, tdp_w=600,
        sm_count=132, l2_mb=50, mig=True, mig_max_instances=7, tflops=_HOPPER_NVL_TFLOPS,
        source="NVIDIA H200 Tensor Core GPU datasheet (H200 NVL column; sparse tensor figures halved; "
        "NVLink via the 2- or 4-way bridge)",
    )),
    _Entry("H800", GpuSpec(
        key="h800-sxm", name="NVIDIA H800 SXM5 80GB", architecture="hopper",
        compute_capability=(9, 0), form_factor="sxm", memory_gb=80, memory_type="HBM3",
        hbm_bandwidth_gbs=3350, nvlink_bandwidth_gbs=400, pcie_gen=5, pcie_lanes=16, tdp_w=700,
        sm_count=132, l2_mb=50, mig=True, mig_max_instances=7, tflops=_H800_SXM_TFLOPS,
        source="NVIDIA H800 Tensor Core GPU datasheet (H800 SXM column; sparse tensor figures halved)",
    )),
    # GH200's GPU is an SXM-class module on the superchip board, not a PCIe card. Its TDP is the whole
    # module's (Grace CPU + Hopper GPU + memory, programmable 450-1000 W), so it is not comparable with a
    # bare GPU's; NVLink is the GPU's 18 fourth-generation links (the 900 GB/s NVLink-C2C to Grace is apart).
    _Entry("GH200", GpuSpec(
        key="gh200-96gb", name="NVIDIA GH200 Grace Hopper Superchip (96GB HBM3)", architecture="hopper",
        compute_capability=(9, 0), form_factor="sxm", memory_gb=96, memory_type="HBM3",
        hbm_bandwidth_gbs=4000, nvlink_bandwidth_gbs=900, pcie_gen=5, pcie_lanes=16, tdp_w=1000,
        sm_count=132, l2_mb=50, mig=True, mig_max_instances=7, tflops=_H100_SXM_TFLOPS,
        source="NVIDIA GH200 Grace Hopper Superchip datasheet (96GB HBM3 column; sparse figures halved)",
    )),
    _Entry("GH200", GpuSpec(
        key="gh200-144gb", name="NVIDIA GH200 Grace Hopper Superchip (144GB HBM3e)", architecture="hopper",
        compute_capability=(9, 0), form_factor="sxm", memory_gb=144, memory_type="HBM3e",
        hbm_bandwidth_gbs=4900, nvlink_bandwidth_gbs=900, pcie_gen=5, pcie_lanes=16, tdp_w=1000,
        sm_count=132, l2_mb=50, mig=True, mig_max_instances=7, tflops=_H100_SXM_TFLOPS,
        source="NVIDIA GH200 Grace Hopper Superchip datasheet (144GB HBM3e column; sparse figures halved)",
    )),
    # --- Ada Lovelace -------------------------------------------------------------------------------------
    _Entry("L4", GpuSpec(
        key="l4", name="NVIDIA L4 24GB", architecture="ada",
        compute_capability=(8, 9), form_factor="pcie", memory_gb=24, memory_type="GDDR6",
        hbm_bandwidth_gbs=300, nvlink_bandwidth_gbs=0, pcie_gen=4, pcie_lanes=16, tdp_w=72,
        sm_count=58, l2_mb=48, mig=False, mig_max_instances=0,
        tflops={"fp32": 30.3, **_dense_from_sparse(tf32=120, bf16=242, fp16=242, fp8=485, int8=485)},
        source="NVIDIA L4 Tensor Core GPU datasheet (sparse tensor figures halved)",
    )),
    _Entry("L40", GpuSpec(
        key="l40", name="NVIDIA L40 48GB", architecture="ada",
        compute_capability=(8, 9), form_factor="pcie", memory_gb=48, memory_type="GDDR6",
        hbm_bandwidth_gbs=864, nvlink_bandwidth_gbs=0, pcie_gen=4, pcie_lanes=16, tdp_w=300,
        sm_count=142, l2_mb=96, mig=False, mig_max_instances=0,
        tflops={"fp32": 90.5, "tf32": 90.5, "bf16": 181.05, "fp16": 181.05, "fp8": 362.0, "int8": 362.0},
        source="NVIDIA L40 GPU datasheet (dense column)",
    )),
    # The L40S datasheet's dense BF16/FP16 column prints 362.05, which is the L40's figure (2490 MHz boost)
    # and half of neither its own 733 sparse figure nor its 733 dense FP8 figure; 142 SMs x 1024 dense
    # FLOP/clk x 2520 MHz gives 366.4. The sparse column is self-consistent, so the table halves it.
    _Entry("L40S", GpuSpec(
        key="l40s", name="NVIDIA L40S 48GB", architecture="ada",
        compute_capability=(8, 9), form_factor="pcie", memory_gb=48, memory_type="GDDR6",
        hbm_bandwidth_gbs=864, nvlink_bandwidth_gbs=0, pcie_gen=4, pcie_lanes=16, tdp_w=350,
        sm_count=142, l2_mb=96, mig=False, mig_max_instances=0,
        tflops={"fp32": 91.6, **_dense_from_sparse(tf32=366, bf16=733, fp16=733, fp8=1466, int8=1466)},
        source="NVIDIA L40S GPU datasheet (sparse tensor figures halved)",
    )),
)
# fmt: on

_SPECS: tuple[GpuSpec, ...] = tuple(entry.spec for entry in _ENTRIES)
_BY_KEY: Mapping[str, GpuSpec] = types.MappingProxyType({spec.key: spec for spec in _SPECS})

# NVML spells out "PCIe" and "NVL" for those Hopper boards, so a Hopper name with no board word is the
# SXM part ("NVIDIA H200", "NVIDIA H100 80GB HBM3"). GH200 names carry the Grace LPDDR5X size instead
# ("NVIDIA GH200 480GB", "NVIDIA GH200 120GB") and mark the HBM3e part ("NVIDIA GH200 144G HBM3e"), so an
# unmarked one is the original 96GB HBM3 part. No Ampere or Volta name omits the board, so none has one.
_PLAIN_NAME_MEANS: Mapping[str, str] = types.MappingProxyType(
    {"H100": "h100-sxm", "H200": "h200-sxm", "H800": "h800-sxm", "GH200": "gh200-96gb"}
)
_NAME_MEMORY_IS_HOST: frozenset[str] = frozenset({"GH200"})

_PREFIXES = frozenset({"NVIDIA", "TESLA"})
_BOARD_WORDS: Mapping[str, str] = types.MappingProxyType(
    {"SXM": "sxm", "SXM2": "sxm", "SXM4": "sxm", "SXM5": "sxm", "PCIE": "pcie", "NVL": "nvl"}
)
_MEMORY_TYPE_WORDS: Mapping[str, str] = types.MappingProxyType({t.upper(): t for t in MEMORY_TYPES})
_SIZE_RE = re.compile(r"(\d+(?:\.\d+)?)(?:GB|G)")
_NUMBER_RE = re.compile(r"\d+(?:\.\d+)?")

# NVML's memory total sits a little under the marketed size (A100 80GB: 80.0 GiB; H200 141GB: 140.4 GiB;
# L40S 48GB with ECC: 45.0 GiB). A total outside this band is not this board's (a MIG slice, a bad read)
# and must not pick a variant.
_PLAUSIBLE_MEMORY_RATIO = (0.85, 1.05)


def _words(nvml_name: str) -> list[str]:
    words = re.sub(r"[-_/]", " ", nvml_name.upper()).split()
    while words and words[0] in _PREFIXES:
        words.pop(0)
    merged: list[str] = []
    for word in words:
        # "80 GB" written apart is one size
        if word in ("GB", "G") and merged and _NUMBER_RE.fullmatch(merged[-1]):
            merged[-1] += word
        else:
            merged.append(word)
    return merged


def _closest_by_memory(candidates: list[GpuSpec], memory_total_bytes: int) -> list[GpuSpec]:
    total_gib = memory_total_bytes / 2**30
    best = min(candidates, key=lambda spec: abs(spec.memory_gb - total_gib))
    low, high = _PLAUSIBLE_MEMORY_RATIO
    if not low <= total_gib / best.memory_gb <= high:
        return candidates
    return [spec for spec in candidates if spec.memory_gb == best.memory_gb]


def match_spec(nvml_name: str, memory_total_bytes: int | None = None) -> GpuSpec | None:
    """The datasheet entry for the GPU NVML names, or ``None`` when the table does not know it for sure.

    ``memory_total_bytes`` (``nvmlDeviceGetMemoryInfo().total``) is only used to choose between variants
    the name leaves open; a memory size written in the name always wins over it.
    """
    words = _words(nvml_name)
    if not words:
        return None
    model, rest = words[0], words[1:]
    candidates = [entry.spec for entry in _ENTRIES if entry.model == model]
    if not candidates:
        return None

    board: str | None = None
    size_gb: float | None = None
    memory_type: str | None = None
    for word in rest:
        if word in _BOARD_WORDS:
            if board is not None and board != _BOARD_WORDS[word]:
                return None
            board = _BOARD_WORDS[word]
        elif word in _MEMORY_TYPE_WORDS:
            memory_type = _MEMORY_TYPE_WORDS[word]
        elif match := _SIZE_RE.fullmatch(word):
            size_gb = float(match.group(1))
        else:
            return None  # a board, size or product the table does not know: no guessing

    if model in _NAME_MEMORY_IS_HOST and size_gb not in {spec.memory_gb for spec in candidates}:
        size_gb = None  # the Grace CPU's memory, which says nothing about the GPU's
    if board is not None:
        candidates = [spec for spec in candidates if spec.form_factor == board]
    if size_gb is not None:
        candidates = [spec for spec in candidates if spec.memory_gb == size_gb]
    if memory_type is not None:
        candidates = [spec for spec in candidates if spec.memory_type == memory_type]
    if len(candidates) > 1 and memory_total_bytes is not None and memory_total_bytes > 0:
        candidates = _closest_by_memory(candidates, memory_total_bytes)
    if len(candidates) > 1 and board is None and model in _PLAIN_NAME_MEANS:
        candidates = [spec for spec in candidates if spec.key == _PLAIN_NAME_MEANS[model]]
    return candidates[0] if len(candidates) == 1 else None


# fmt: off
_DTYPE_ALIASES: Mapping[str, str] = types.MappingProxyType(
    {
        "fp64": "fp64", "float64": "fp64", "double": "fp64",
        "fp64_tensor": "fp64_tensor",
        "fp32": "fp32", "float32": "fp32", "float": "fp32",
        "tf32": "tf32", "tensorfloat32": "tf32",
        "bf16": "bf16", "bfloat16": "bf16",
        "fp16": "fp16", "float16": "fp16", "half": "fp16",
        "fp8": "fp8", "float8": "fp8", "float8_e4m3fn": "fp8", "float8_e5m2": "fp8",
        "int8": "int8",
    }
)
# fmt: on


def peak_tflops(spec: GpuSpec, dtype: str) -> float | None:
    """Dense peak TFLOP/s (TOPS for int8) of ``spec`` in ``dtype``; ``None`` if it has no such peak.

    ``dtype`` may be a dgxperf name ("bf16"), a long name ("bfloat16", "half", "float32") or a torch
    dtype's string ("torch.bfloat16").
    """
    name = dtype.strip().lower().removeprefix("torch.")
    canonical = _DTYPE_ALIASES.get(name)
    if canonical is None:
        return None
    return spec.tflops.get(canonical)


def all_specs() -> tuple[GpuSpec, ...]:
    """Every GPU the table knows, in table order (by architecture, then board)."""
    return _SPECS


def get_spec(key: str) -> GpuSpec:
    """The entry with this ``key`` ("h100-sxm"); ``KeyError`` naming the known keys otherwise."""
    try:
        return _BY_KEY[key]
    except KeyError:
        raise KeyError(f"no GPU spec with key {key!r}; known keys: {', '.join(_BY_KEY)}") from None


# GB/s per lane per direction after line encoding (Gen6 uses PAM4 + FLIT with ~242/256 efficiency).
LANE_GBS = {
    1: 0.25,
    2: 0.5,
    3: 8 * 128 / 130 / 8,
    4: 16 * 128 / 130 / 8,
    5: 32 * 128 / 130 / 8,
    6: 64 * 242 / 256 / 8,
}


def link_peak_gbs(generation: int | None, width: int | None) -> float | None:
    if not generation or not width or generation not in LANE_GBS:
        return None
    return LANE_GBS[generation] * width
