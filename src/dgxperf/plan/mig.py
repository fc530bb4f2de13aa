"""MIG layout planning for A100, H100 and H200: NVIDIA's profile tables, a placement validator, a planner.

Nothing here touches a GPU. :func:`plan_mig` returns a :class:`MigPlan` (schema ``dgxperf.plan.mig/1``):
the layout, or why none exists and the nearest valid alternatives; the ``nvidia-smi mig`` commands that
would create it; the CUDA_VISIBLE_DEVICES of every tenant instance; a systemd (cgroup v2) slice per tenant.
A person reviews that and runs it.

The placement model
    A MIG GPU has 8 memory slices and 7 compute slices. A GPU instance of a profile takes ``size``
    consecutive memory slices from one of the profile's allowed start slots, as ``nvidia-smi mig -lgipp``
    prints them (``{0,2,4,6}:2``: starts 0, 2, 4 or 6, two slices). Instances never overlap, and no profile
    has more instances than its maximum. On these GPUs that is the whole rule: the 7-compute-slice limit
    follows from it, because every profile has no more compute than memory slices and slice 7 is only
    reachable by profiles with fewer compute than memory slices (1g double-memory at 6, 3g at 4, 7g).
    That is also why 7 x 1g leaves memory slice 7 unused: no 1g profile starts at slot 7. On one GPU a set
    of profiles fits exactly when it has at most 8 memory and 7 compute slices and no profile beyond its
    maximum (the tests check every set), but the start slots still matter: 3g.20gb + 4 x 1g.5gb works only
    with the 3g at slot 4. :func:`check_layout` checks a layout against the rules on its own, without the
    planner's code.

Tenants
    ``"3g + 2x1g"``, ``"3g.71gb + 2x1g.18gb"`` (profiles; a bare ``3g`` is the GPU's standard 3g profile)
    or ``"inference 3GB x1, training 10GB x6"`` (a name, a memory need, optionally a compute need ``2g``
    or ``40SM``, a count). GB is 10^9 bytes, GiB 2^30 bytes. A memory need is
    compared with the memory an instance really has, as ``nvidia-smi mig -lgip`` reports it (a 1g.10gb on
    an A100 80GB has 9.50 GiB = 10.2 GB), not with the rounded number in the profile's name. Each instance's
    memory need first gets a CUDA context reserve (``context_gb``, default :data:`CONTEXT_GB`): every
    process on a MIG instance pays for its CUDA context out of that instance's memory, so a job whose
    tensors take 10 GB does not run in an instance of 10.2 GB. Profile tenants get no reserve.

The objective ("least waste")
    1. Each tenant instance gets the smallest profile that meets its need. On these GPUs the profiles form
       a chain 1g < 1g double-memory < 2g < 3g < 4g < 7g in which each one's start slots include the next
       one's and its slices fit inside the next one's, so a smaller profile can replace a larger one in
       any valid layout: the smallest is never what stops a layout from existing, and it hands out the
       fewest slices. 2. The instances go on the fewest GPUs, leaving whole GPUs free. 3. On each GPU the
       start slots are chosen so the free memory slices stay usable by another instance (fewest stranded
       slices), then so the free space takes the most compute and the largest profile.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

PLAN_SCHEMA = "dgxperf.plan.mig/1"
MEMORY_SLICES = 8
COMPUTE_SLICES = 7
MAX_GPUS = 8  # a DGX/HGX node; plan bigger clusters node by node
MAX_INSTANCES = MAX_GPUS * COMPUTE_SLICES
GB = 1e9
GIB = float(2**30)
# Every process on a MIG instance pays for its CUDA context out of the instance's memory: a few hundred MB,
# typically 0.3-0.6 GB on A100/H100 with CUDA lazy loading (CUDA_MODULE_LOADING=LAZY: the default on Linux
# since CUDA 12.2, and PyTorch sets it since 1.13), more with eager loading or many kernels. This much is
# added to each memory need by default.
CONTEXT_GB = 0.5
# A need (with its context reserve) this close to what the instance has leaves no room for allocator
# fragmentation, or a context larger than the reserve (or any context, with the reserve off): the plan says so.
TIGHT_GB = 0.5
TIGHT_SHARE = 0.05
MIG_GUIDE = "https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html"


class MigPlanError(ValueError):
    """Bad input: an unknown GPU model or profile, or a tenant list that does not parse."""


# -- NVIDIA's tables ------------------------------------------------------------------------------------------

_PLACEMENT = re.compile(r"^\{(\d(?:,\d)*)\}:(\d)$")


@functools.cache
def _parse_placements(text: str) -> tuple[tuple[int, ...], int]:
    match = _PLACEMENT.match(text)
    if match is None:
        raise ValueError(f"placement {text!r} is not in nvidia-smi's {{starts}}:size form")
    return tuple(int(s) for s in match.group(1).split(",")), int(match.group(2))


@dataclass(frozen=True)
class Profile:
    """One GPU instance profile of one GPU model, as NVIDIA's tables give it."""

    name: str  # "3g.20gb", "1g.5gb+me"
    profile_id: int  # the ID `nvidia-smi mig -lgip` prints and `-cgi` takes
    compute_slices: int  # of 7
    memory_slices: int  # of 8
    memory_gib: float  # usable memory as `nvidia-smi mig -lgip` reports it
    sms: int
    max_instances: int
    placements: str  # as `nvidia-smi mig -lgipp` prints them: "{0,2,4,6}:2"

    @property
    def starts(self) -> tuple[int, ...]:
        return _parse_placements(self.placements)[0]

    @property
    def size(self) -> int:
        return _parse_placements(self.placements)[1]

    @property
    def media(self) -> bool:
        """A +me profile: the media extensions (NVDEC/JPEG/OFA) that the plain 1g profiles lack."""
        return self.name.endswith("+me")

    @property
    def memory_gb(self) -> float:
        return self.memory_gib * GIB / GB

    @property
    def short(self) -> str:
        return f"{self.compute_slices}g"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "profile_id": self.profile_id,
            "compute_slices": self.compute_slices,
            "memory_slices": self.memory_slices,
            "memory_gib": self.memory_gib,
            "memory_gb": round(self.memory_gb, 2),
            "sms": self.sms,
            "max_instances": self.max_instances,
            "placements": self.placements,
            "starts": list(self.starts),
            "size": self.size,
        }


@dataclass(frozen=True)
class GpuModel:
    key: str  # "a100-40gb"
    name: str  # "A100-SXM4-40GB"
    memory_gb: int  # as marketed
    source: str
    profiles: tuple[Profile, ...]
    aliases: tuple[str, ...] = ()
    note: str = ""

    def profile(self, name: str) -> Profile | None:
        wanted = name.lower().removeprefix("mig ").strip()
        return next((p for p in self.profiles if p.name == wanted), None)

    def standard(self, compute_slices: int, media: bool = False) -> Profile | None:
        """What a bare "3g" means: the profile of that many compute slices with the least memory."""
        fits = [p for p in self.profiles if p.compute_slices == compute_slices and p.media == media]
        return min(fits, key=lambda p: p.memory_slices, default=None)

    @property
    def gb_per_slice(self) -> float:
        """A memory slice by the marketed size (80 GB / 8)."""
        return self.memory_gb / MEMORY_SLICES

    @property
    def slice_gb(self) -> float:
        """A memory slice by what a 1-slice instance really has (`-lgip`), in GB."""
        return min(p.memory_gb for p in self.profiles if p.memory_slices == 1)


# The same seven placements on all four GPUs: `nvidia-smi mig -lgipp` on A100 (MIG user guide, "Creating GPU
# Instances") and on H100 80GB/NVL (NVIDIA GPU operator and Google Dataproc scripts quote the same output).
_P1 = "{0,1,2,3,4,5,6}:1"
_P1D = "{0,2,4,6}:2"
_P2 = "{0,2,4}:2"
_P3 = "{0,4}:4"
_P4 = "{0}:4"
_P7 = "{0}:8"


def _model(
    key: str,
    name: str,
    memory_gb: int,
    source: str,
    aliases: tuple[str, ...],
    rows: Sequence[tuple[str, int, int, int, float, int, int, str]],
    note: str = "",
) -> GpuModel:
    return GpuModel(key, name, memory_gb, source, tuple(Profile(*row) for row in rows), aliases, note)


# Rows: name, ID, compute slices, memory slices, usable GiB, SMs, max instances, placements.
# Profiles, fractions and instance counts: NVIDIA MIG User Guide, "Supported MIG Profiles" (MIG_GUIDE).
# Its A100 table prints 1g.10gb with "1/8" of the memory; that is a typo there: the profile has 10 of 40 GB,
# `-lgip` reports 9.75 GiB for it and `-lgipp` gives it 2 slices ({0,2,4,6}:2).
MODELS: dict[str, GpuModel] = {
    m.key: m
    for m in (
        # -lgip: the MIG User Guide's "Getting Started" A100-SXM4-40GB output (R525+, with 1g.10gb).
        _model("a100-40gb", "A100-SXM4-40GB", 40, "MIG User Guide: A100 profiles table; -lgip/-lgipp output",
               ("a100-sxm4-40gb", "a100-pcie-40gb", "a100 40gb"), (
            ("1g.5gb", 19, 1, 1, 4.75, 14, 7, _P1),
            ("1g.5gb+me", 20, 1, 1, 4.75, 14, 1, _P1),
            ("1g.10gb", 15, 1, 2, 9.75, 14, 4, _P1D),
            ("2g.10gb", 14, 2, 2, 9.75, 28, 3, _P2),
            ("3g.20gb", 9, 3, 4, 19.62, 42, 2, _P3),
            ("4g.20gb", 5, 4, 4, 19.62, 56, 1, _P4),
            ("7g.40gb", 0, 7, 8, 39.38, 98, 1, _P7),
        )),
        # -lgip: the "Example output for A100 80GB" in NVIDIA's GPU operator/MIG documentation. Newer drivers
        # report 9.75 GiB for 1g.10gb; the table keeps the older, smaller figures so a plan never over-promises.
        _model("a100-80gb", "A100-SXM4-80GB", 80, "MIG User Guide: A100 profiles table (80GB names); -lgip output",
               ("a100-sxm4-80gb", "a100-pcie-80gb", "a100 80gb", "a100-80gb-pcie"), (
            ("1g.10gb", 19, 1, 1, 9.50, 14, 7, _P1),
            ("1g.10gb+me", 20, 1, 1, 9.50, 14, 1, _P1),
            ("1g.20gb", 15, 1, 2, 19.50, 14, 4, _P1D),
            ("2g.20gb", 14, 2, 2, 19.50, 28, 3, _P2),
            ("3g.40gb", 9, 3, 4, 39.25, 42, 2, _P3),
            ("4g.40gb", 5, 4, 4, 39.25, 56, 1, _P4),
            ("7g.80gb", 0, 7, 8, 79.00, 98, 1, _P7),
        )),
        # H100 SXM5 80GB (DGX/HGX H100). -lgip from an H100 SXM5 (driver 570): 1g.20gb has 26 SMs, not 16,
        # as NVIDIA's own -lgip outputs for H100 NVL 1g.24gb and GH200 1g.36gb also show (NVIDIA/gpu-operator
        # PR 903, NVIDIA/mig-parted PR 139). H100 PCIe has other SM counts (114 in all) and is not this table.
        _model("h100-80gb", "H100-SXM5-80GB", 80, "MIG User Guide: H100 80GB profiles table; -lgip output",
               ("h100-sxm5-80gb", "h100 80gb", "h100-sxm", "h100"), (
            ("1g.10gb", 19, 1, 1, 9.75, 16, 7, _P1),
            ("1g.10gb+me", 20, 1, 1, 9.75, 16, 1, _P1),
            ("1g.20gb", 15, 1, 2, 19.62, 26, 4, _P1D),
            ("2g.20gb", 14, 2, 2, 19.62, 32, 3, _P2),
            ("3g.40gb", 9, 3, 4, 39.50, 60, 2, _P3),
            ("4g.40gb", 5, 4, 4, 39.50, 64, 1, _P4),
            ("7g.80gb", 0, 7, 8, 79.25, 132, 1, _P7),
        )),
        # H200 141GB. -lgip: NVIDIA/mig-parted issue 120 ("Add support for the NVIDIA H200 GPU"). That output
        # stops before 7g.141gb; its 139.25 GiB is an estimate (2 x 3g.71gb's 69.50 + 0.25, the gap A100 and
        # H100 show between 7g and two halves).
        _model("h200-141gb", "H200-SXM5-141GB", 141, "MIG User Guide: H200 profiles table; -lgip output",
               ("h200", "h200-sxm5-141gb", "h200 141gb", "h200-nvl", "h200 nvl"), (
            ("1g.18gb", 19, 1, 1, 16.00, 16, 7, _P1),
            ("1g.18gb+me", 20, 1, 1, 16.00, 16, 1, _P1),
            ("1g.35gb", 15, 1, 2, 32.25, 26, 4, _P1D),
            ("2g.35gb", 14, 2, 2, 32.25, 32, 3, _P2),
            ("3g.71gb", 9, 3, 4, 69.50, 60, 2, _P3),
            ("4g.71gb", 5, 4, 4, 69.50, 64, 1, _P4),
            ("7g.141gb", 0, 7, 8, 139.25, 132, 1, _P7),
        ), "7g.141gb's 139.25 GiB is an estimate: the cited -lgip output stops before it"),
    )
}  # fmt: skip
GPU_MODELS = tuple(MODELS)


def get_model(name: str | GpuModel) -> GpuModel:
    """A model by key (``a100-80gb``) or NVIDIA name (``A100-SXM4-80GB``, ``H200``), any case."""
    if isinstance(name, GpuModel):
        return name
    wanted = name.strip().lower().replace("_", "-").removeprefix("nvidia ").removeprefix("nvidia-")
    for model in MODELS.values():
        if wanted in (model.key, model.name.lower(), *model.aliases):
            return model
    raise MigPlanError(f"unknown GPU model {name!r}; choose from {', '.join(GPU_MODELS)}")


def profile_table(gpu_model: str | GpuModel) -> list[dict[str, Any]]:
    return [p.to_json() for p in get_model(gpu_model).profiles]


# -- the validator ----------------------------------------------------------------------------------------------


def check_layout(gpu_model: str | GpuModel, placements: Iterable[tuple[str, int]]) -> list[str]:
    """What breaks NVIDIA's rules in one GPU's layout: a list of problems, empty when the layout is valid.

    ``placements`` are (profile name, start slot) pairs. This reads the ``{starts}:size`` strings itself and
    shares no code with the planner, so the tests can hold every planner layout against it.
    """
    model = get_model(gpu_model)
    problems: list[str] = []
    owner: dict[int, str] = {}
    counts: Counter[str] = Counter()
    compute = memory = 0
    for name, start in placements:
        profile = model.profile(name)
        if profile is None:
            problems.append(f"{name} is not an {model.name} profile")
            continue
        match = _PLACEMENT.match(profile.placements)
        assert match is not None
        starts = {int(s) for s in match.group(1).split(",")}
        size = int(match.group(2))
        label = f"{profile.name}@{start}"
        if start not in starts:
            allowed = ",".join(str(s) for s in sorted(starts))
            problems.append(f"{label}: {profile.name} may start only at slot {allowed}")
            continue
        if start + size > MEMORY_SLICES:
            problems.append(f"{label}: runs past memory slice {MEMORY_SLICES - 1}")
        for slot in range(start, start + size):
            if slot in owner:
                problems.append(f"{label} overlaps {owner[slot]} at memory slice {slot}")
                break
        for slot in range(start, start + size):
            owner.setdefault(slot, label)
        counts[profile.name] += 1
        compute += profile.compute_slices
        memory += profile.memory_slices
    for name, count in counts.items():
        profile = model.profile(name)
        assert profile is not None
        if count > profile.max_instances:
            problems.append(f"{count} x {name}: at most {profile.max_instances} per GPU")
    if compute > COMPUTE_SLICES:
        problems.append(f"{compute} compute slices: a GPU has {COMPUTE_SLICES}")
    if memory > MEMORY_SLICES:
        problems.append(f"{memory} memory slices: a GPU has {MEMORY_SLICES}")
    return problems


# -- tenants ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TenantSpec:
    """One tenant as written: either a profile or a need (memory, compute slices, SMs), and a count."""

    name: str
    count: int
    text: str
    profile: str | None = None  # a full profile name: "1g.10gb", "1g.5gb+me"
    compute: int | None = None  # "3g": alone, that GPU's standard 3g profile; with a memory need, a minimum
    memory_gb: float | None = None  # decimal GB
    memory_text: str | None = None  # as written: "10GB", "9.5 GiB"
    sms: int | None = None
    media: bool = False
    named: bool = False

    @property
    def is_need(self) -> bool:
        return self.memory_gb is not None or self.sms is not None

    def need_text(self, context_gb: float = 0.0) -> str:
        """The need as written; with a CUDA context reserve: "60 GB + 0.5 GB CUDA context, 3g"."""
        parts = []
        if self.memory_gb is not None:
            parts.append((self.memory_text or f"{_num(self.memory_gb)} GB") + _context_text(context_gb))
        if self.compute is not None:
            parts.append(f"{self.compute}g")
        if self.sms is not None:
            parts.append(f"{self.sms} SMs")
        if self.media:
            parts.append("+me")
        return (", " if context_gb and self.memory_gb is not None else " ").join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "count": self.count,
            "request": self.text,
            "profile": self.profile,
            "compute_slices": self.compute,
            "memory_gb": self.memory_gb,
            "memory_text": self.memory_text,
            "sms": self.sms,
            "media": self.media,
        }


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _num(value: float) -> str:
    return f"{value:g}" if value < 1e5 else f"{value:.0f}"


# "+me" belongs to the profile before it ("1g.5gb+me", "1g +me"); any other "+" separates tenants.
_SPLIT = re.compile(r"\s*(?:[,;\n]|\+(?!\s*me\b))\s*", re.IGNORECASE)
_COUNT_AFTER = re.compile(r"^[x×*](\d+)$")
_COUNT_BEFORE = re.compile(r"^(\d+)[x×*]$")
_COUNT_GLUED = re.compile(r"^(\d+)[x×*](.+)$")
_COUNT_TRAILING = re.compile(r"^(.+?)([x×*]\d+)$")
_PROFILE_TOKEN = re.compile(r"^(?:mig[-_]?)?(\d+)g(?:\.(\d+)gb)?(\+me)?$")
_MEMORY_TOKEN = re.compile(r"^(\d+(?:\.\d+)?)(gb|gib|mb|mib|tb|tib)$")
_SMS_TOKEN = re.compile(r"^(\d+)sms?$")
_NUMBER = re.compile(r"^\d+(?:\.\d+)?$")
_NAME = re.compile(r"^[a-z_][a-z0-9_.-]*$", re.IGNORECASE)
_UNIT_GB = {"gb": 1.0, "gib": GIB / GB, "mb": 1e-3, "mib": 2**20 / GB, "tb": 1e3, "tib": 2**40 / GB}
_TOKEN_HELP = "a count (x6), a profile (3g, 1g.10gb), a memory need (10GB, 9.5GiB) or SMs (40SM)"


def parse_tenants(text: str) -> list[TenantSpec]:
    """Parse ``"3g + 2x1g"`` or ``"inference 3GB x1, training 10GB x6"``; MigPlanError says which part is wrong."""
    items = [item for item in _SPLIT.split(text.strip()) if item]
    if not items:
        raise MigPlanError('no tenants given: e.g. "3g + 2x1g" or "inference 3GB x1, training 10GB x6"')
    specs = [_parse_item(item, index) for index, item in enumerate(items, start=1)]
    seen: set[str] = set()
    for spec in specs:
        if spec.name.lower() in seen:
            raise MigPlanError(f"tenant name {spec.name!r} is used twice; give each tenant its own name")
        seen.add(spec.name.lower())
    total = sum(s.count for s in specs)
    if total > MAX_INSTANCES:
        raise MigPlanError(
            f"{total} instances asked for; {MAX_GPUS} GPUs hold at most {MAX_INSTANCES} (7 each)"
        )
    return specs


def _tokens(item: str) -> list[str]:
    raw = item.split()
    if raw and (glued := re.match(r"^([^:=]+[:=])(.+)$", raw[0])):
        raw[0:1] = [glued.group(1), glued.group(2)]  # "inference:3GB", "web=3g": a name glued to the rest
    merged: list[str] = []
    for token in raw:
        low = token.lower()
        previous = merged[-1].lower() if merged else ""
        if merged and _NUMBER.match(previous) and (low in _UNIT_GB or low in ("sm", "sms")):
            merged[-1] += low  # "10 GB", "40 SMs"
        elif merged and previous in ("x", "×", "*") and low.isdigit():
            merged[-1] += low  # "x 6"
        elif merged and _NUMBER.match(previous) and low in ("x", "×", "*"):
            merged[-1] += low  # "6 x"
        else:
            merged.append(token)
    return merged


def _parse_item(item: str, index: int) -> TenantSpec:
    where = f"in {item!r}"
    name: str | None = None
    count: int | None = None
    profile: str | None = None
    compute: int | None = None
    memory: float | None = None
    memory_text: str | None = None
    sms: int | None = None
    media = False
    pending = _tokens(item)
    position = 0
    while pending:
        token = pending.pop(0)
        position += 1
        low = token.lower()
        if match := (_COUNT_AFTER.match(low) or _COUNT_BEFORE.match(low)):
            if count is not None:
                raise MigPlanError(f"{where}: two counts ({count} and {token}); give one, e.g. x6")
            count = int(match.group(1))
            if count < 1:
                raise MigPlanError(f"{where}: {token}: a count is at least 1")
            continue
        if match := _COUNT_GLUED.match(low):
            pending[0:0] = [f"{match.group(1)}x", token[len(match.group(1)) + 1 :]]
            position -= 1
            continue
        glued = _COUNT_TRAILING.match(low)
        if glued and (_PROFILE_TOKEN.match(glued.group(1)) or _MEMORY_TOKEN.match(glued.group(1))):
            pending[0:0] = [token[: len(glued.group(1))], glued.group(2)]  # "1g*6", "10GBx2"
            position -= 1
            continue
        if low == "+me":
            media = True
            continue
        if low == "mig" and pending and _PROFILE_TOKEN.match(pending[0].lower()):
            position -= 1  # "MIG 3g.20gb", as nvidia-smi prints it
            continue
        if match := _PROFILE_TOKEN.match(low):
            if profile is not None or compute is not None:
                raise MigPlanError(f"{where}: two profiles; give one per tenant (split with + or ,)")
            compute = int(match.group(1))
            media = media or bool(match.group(3))
            if match.group(2):
                profile = f"{compute}g.{match.group(2)}gb" + ("+me" if match.group(3) else "")
            if compute not in (1, 2, 3, 4, 7):
                hint = f"; for memory write {compute}GB" if not match.group(2) else ""
                raise MigPlanError(
                    f"{where}: {token}: MIG profiles have 1, 2, 3, 4 or 7 compute slices{hint}"
                )
            continue
        if match := _MEMORY_TOKEN.match(low):
            if memory is not None:
                raise MigPlanError(f"{where}: two memory needs; give one per tenant")
            memory = float(match.group(1)) * _UNIT_GB[match.group(2)]
            unit = {"gb": "GB", "gib": "GiB", "mb": "MB", "mib": "MiB", "tb": "TB", "tib": "TiB"}[
                match.group(2)
            ]
            memory_text = (
                f"{match.group(1)} {unit}"
                if unit == "GB"
                else (f"{match.group(1)} {unit} = {_num(round(memory, 2))} GB")
            )
            if memory <= 0:
                raise MigPlanError(f"{where}: {token}: a memory need is more than 0")
            continue
        if match := _SMS_TOKEN.match(low):
            if sms is not None:
                raise MigPlanError(f"{where}: two SM needs; give one per tenant")
            sms = int(match.group(1))
            continue
        if _NUMBER.match(low):
            raise MigPlanError(f"{where}: {token!r} needs a unit: {token}GB for memory, x{token} for a count")
        bare = token.rstrip(":=")
        if position == 1 and _NAME.match(bare):
            name = bare
            continue
        hint = f" (a name goes first: {bare} 10GB x2)" if _NAME.match(bare) else ""
        raise MigPlanError(f"{where}: {token!r} is not {_TOKEN_HELP}{hint}")
    if media and profile is not None and not profile.endswith("+me"):
        profile += "+me"  # "1g.5gb +me"
    if profile is not None and (memory is not None or sms is not None):
        raise MigPlanError(f"{where}: give either a profile ({profile}) or a need (10GB, 2g, 40SM), not both")
    if compute is None and memory is None and sms is None:
        raise MigPlanError(f"{where}: no profile (3g, 1g.10gb) and no need (10GB, 40SM) in it")
    return TenantSpec(
        name=name or f"tenant{index}",
        count=count or 1,
        text=item,
        profile=profile,
        compute=compute,
        memory_gb=memory,
        memory_text=memory_text,
        sms=sms,
        media=media,
        named=name is not None,
    )


@dataclass(frozen=True)
class TenantDemand:
    """A tenant with the profile it gets on one GPU model (None when no profile meets its need)."""

    spec: TenantSpec
    profile: Profile | None
    why: str
    headroom_gb: float | None = None  # usable memory above the need and its context reserve, for needs
    context_gb: float = 0.0  # the CUDA context reserve added to the memory need (0 for profile tenants)

    @property
    def need_gb(self) -> float | None:
        """The memory an instance must have: the need plus the CUDA context reserve."""
        return None if self.spec.memory_gb is None else self.spec.memory_gb + self.context_gb

    def need_text(self) -> str:
        """The need as written, with the reserve: "10 GB + 0.5 GB CUDA context"."""
        return self.spec.need_text(self.context_gb)

    @property
    def tight(self) -> bool:
        need = self.need_gb
        if self.headroom_gb is None or need is None:
            return False
        return self.headroom_gb < max(TIGHT_GB, TIGHT_SHARE * need)


def _chain(model: GpuModel, media: bool) -> list[Profile]:
    """The profiles a need may get, smallest first (see the module docstring for why smallest wins)."""
    if media:
        pool = [p for p in model.profiles if p.media or p.compute_slices == COMPUTE_SLICES]
    else:
        pool = [p for p in model.profiles if not p.media]
    return sorted(pool, key=lambda p: (p.memory_slices, p.compute_slices, p.sms))


def _mem(profile: Profile) -> str:
    return f"{profile.memory_gib:.2f} GiB = {profile.memory_gb:.1f} GB"


def _context_text(context_gb: float) -> str:
    return f" + {_num(context_gb)} GB CUDA context" if context_gb else ""


def _check_context(context_gb: float) -> float:
    if not math.isfinite(context_gb) or context_gb < 0:
        raise MigPlanError(
            f"--context-gb {context_gb:g}: the CUDA context reserve per instance is 0 (off) or more GB "
            f"(default {CONTEXT_GB:g})"
        )
    return float(context_gb)


def resolve_tenant(
    gpu_model: str | GpuModel, spec: TenantSpec, *, context_gb: float = CONTEXT_GB
) -> TenantDemand:
    """The profile a tenant gets: the one it named, or the smallest that meets its need.

    A memory need gets ``context_gb`` added first: the CUDA context each instance's process pays for out of
    the instance's memory (0 turns the reserve off). A profile tenant, or a need without memory, gets none.
    """
    model = get_model(gpu_model)
    context_gb = _check_context(context_gb)
    if spec.profile is not None:
        profile = model.profile(spec.profile)
        if profile is None:
            alike = [p.name for p in model.profiles if p.compute_slices == spec.compute]
            raise MigPlanError(
                f"{spec.profile} is not an {model.name} profile; its {spec.compute}g profiles are "
                f"{', '.join(alike)} (dgxperf plan mig --list-profiles --gpu-model {model.key})"
            )
        return TenantDemand(spec, profile, f"asked for {profile.name}")
    if not spec.is_need:
        assert spec.compute is not None
        profile = model.standard(spec.compute, spec.media)
        if profile is None:
            raise MigPlanError(f"{model.name} has no {spec.compute}g{'+me' if spec.media else ''} profile")
        return TenantDemand(spec, profile, f"{spec.compute}g{'+me' if spec.media else ''} = {profile.name}")
    chain = _chain(model, spec.media)
    context = context_gb if spec.memory_gb is not None else 0.0
    need_gb = spec.memory_gb + context if spec.memory_gb is not None else 0.0
    fits = [
        p
        for p in chain
        if p.memory_gb >= need_gb and p.compute_slices >= (spec.compute or 1) and p.sms >= (spec.sms or 0)
    ]
    if not fits:
        top = chain[-1]
        short = []
        if need_gb > top.memory_gb:
            written = spec.memory_text or f"{_num(spec.memory_gb or 0.0)} GB"
            short.append(f"{written}{_context_text(context)} > {_mem(top)}")
        if spec.sms is not None and spec.sms > top.sms:
            short.append(f"{spec.sms} SMs > {top.sms}")
        return TenantDemand(
            spec,
            None,
            f"no {model.name} instance is big enough: the largest, {top.name}, has "
            f"{_mem(top)} and {top.sms} SMs ({'; '.join(short) or 'need too large'}); a MIG instance never spans "
            "GPUs, so run it without MIG (or shard it)",
            context_gb=context,
        )
    profile = fits[0]
    smaller = [
        p
        for p in chain
        if (p.memory_slices, p.compute_slices, p.sms)
        < (profile.memory_slices, profile.compute_slices, profile.sms)
    ]
    why = f"smallest profile with >= {spec.need_text(context)}: {profile.name} has {_mem(profile)}, {profile.sms} SMs"
    if smaller:
        below = smaller[-1]
        lacks = []
        if below.memory_gb < need_gb:
            lacks.append(f"{below.memory_gib:.2f} GiB = {below.memory_gb:.1f} GB")
        if below.compute_slices < (spec.compute or 1):
            lacks.append(_plural(below.compute_slices, "compute slice"))
        if below.sms < (spec.sms or 0):
            lacks.append(f"{below.sms} SMs")
        if lacks:
            why += f" ({below.name} has only {', '.join(lacks)})"
    headroom = profile.memory_gb - need_gb if spec.memory_gb is not None else None
    return TenantDemand(spec, profile, why, headroom, context)


# -- single-GPU catalog: every valid placement set, the best placement of each profile multiset -----------------


@dataclass(frozen=True)
class _Catalog:
    # profile count vector -> the best placement of it on one GPU, as (profile index, start) pairs
    best: Mapping[tuple[int, ...], tuple[tuple[int, int], ...]]
    # per profile index: the count vectors that include it, fullest first
    containing: tuple[tuple[tuple[int, ...], ...], ...]
    pack_order: tuple[int, ...]  # profile indexes, most constrained placement first


def _mask(start: int, size: int) -> int:
    return ((1 << size) - 1) << start


@functools.cache
def _fill(key: str, free: int) -> tuple[int, int, int]:
    """What more a free-slot mask takes: (most memory slices, most compute slices, largest single size)."""
    model = MODELS[key]
    options = [
        (p, _mask(s, p.size))
        for p in model.profiles
        if not p.media
        for s in p.starts
        if free & _mask(s, p.size) == _mask(s, p.size)
    ]
    if not options:
        return (0, 0, 0)
    best_slices = best_compute = 0
    for profile, mask in options:
        slices, compute, _ = _fill(key, free & ~mask)
        best_slices = max(best_slices, profile.size + slices)
        best_compute = max(best_compute, profile.compute_slices + compute)
    return (best_slices, best_compute, max(p.size for p, _ in options))


@functools.cache
def _catalog(key: str) -> _Catalog:
    """Every valid placement set of one GPU, enumerated once (a few thousand): for each profile multiset,
    the placement whose free slots stay the most usable."""
    model = MODELS[key]
    n = len(model.profiles)
    options = [(i, s, _mask(s, p.size)) for i, p in enumerate(model.profiles) for s in p.starts]
    best: dict[tuple[int, ...], tuple[tuple[Any, ...], tuple[tuple[int, int], ...]]] = {}
    counts = [0] * n
    chosen: list[tuple[int, int]] = []

    def visit(first: int, used: int) -> None:
        free = _mask(0, MEMORY_SLICES) & ~used
        slices, compute, largest = _fill(key, free)
        placement = tuple(sorted(chosen, key=lambda c: (c[1], c[0])))
        score = (bin(free).count("1") - slices, -compute, -largest, tuple(s for _, s in placement))
        vector = tuple(counts)
        if vector not in best or score < best[vector][0]:
            best[vector] = (score, placement)
        for j in range(first, len(options)):
            i, start, mask = options[j]
            if used & mask or counts[i] >= model.profiles[i].max_instances:
                continue
            counts[i] += 1
            chosen.append((i, start))
            visit(j + 1, used | mask)
            chosen.pop()
            counts[i] -= 1

    visit(0, 0)
    order = tuple(sorted(range(n), key=lambda i: (len(model.profiles[i].starts), -model.profiles[i].size, i)))
    slices = [p.memory_slices for p in model.profiles]

    def fullness(v: tuple[int, ...]) -> tuple[int, int, tuple[int, ...]]:
        return (-sum(c * s for c, s in zip(v, slices, strict=True)), -sum(v), v)

    containing = tuple(tuple(sorted((v for v in best if v[i]), key=fullness)) for i in range(n))
    return _Catalog(
        best={v: p for v, (_, p) in best.items()},
        containing=containing,
        pack_order=order,
    )


def _lower_bound(model: GpuModel, demand: Sequence[int]) -> int:
    """GPUs that a demand needs at least, from counts alone."""
    if not any(demand):
        return 0
    profiles = model.profiles
    memory = sum(c * p.memory_slices for c, p in zip(demand, profiles, strict=True))
    compute = sum(c * p.compute_slices for c, p in zip(demand, profiles, strict=True))
    per_profile = max(math.ceil(c / p.max_instances) for c, p in zip(demand, profiles, strict=True))
    slot0 = sum(c for c, p in zip(demand, profiles, strict=True) if p.starts == (0,))
    return max(
        math.ceil(memory / MEMORY_SLICES),
        math.ceil(compute / COMPUTE_SLICES),
        math.ceil(sum(demand) / COMPUTE_SLICES),
        per_profile,
        slot0,
    )


@functools.lru_cache(maxsize=200_000)
def _can_pack(key: str, demand: tuple[int, ...], gpus: int) -> tuple[tuple[int, ...], ...] | None:
    """What each GPU holds (profile count vectors) so that ``gpus`` GPUs hold ``demand``; None if they can't.

    The GPU with the most constrained instance is filled until nothing more of the demand fits on it: any
    packing can be changed into one like that without using more GPUs (move an instance that would still
    fit onto it), so trying only those configurations, fullest first, loses no solution.
    """
    if not any(demand):
        return ()
    if _lower_bound(MODELS[key], demand) > gpus:
        return None
    catalog = _catalog(key)
    first = next(i for i in catalog.pack_order if demand[i])
    for config in catalog.containing[first]:
        if any(c > d for c, d in zip(config, demand, strict=True)) or _extendable(catalog, config, demand):
            continue
        rest = _can_pack(key, tuple(d - c for d, c in zip(demand, config, strict=True)), gpus - 1)
        if rest is not None:
            return (config, *rest)
    return None


def _min_gpus(key: str, demand: tuple[int, ...], limit: int = MAX_GPUS) -> int | None:
    """The fewest GPUs that hold ``demand``, or None when that is more than ``limit``."""
    for gpus in range(_lower_bound(MODELS[key], demand), limit + 1):
        if _can_pack(key, demand, gpus) is not None:
            return gpus
    return None


def _extendable(catalog: _Catalog, config: tuple[int, ...], demand: tuple[int, ...]) -> bool:
    for i in range(len(config)):
        if config[i] < demand[i]:
            bigger = (*config[:i], config[i] + 1, *config[i + 1 :])
            if bigger in catalog.best:
                return True
    return False


def _vector(model: GpuModel, profiles: Iterable[Profile | str]) -> tuple[int, ...]:
    names = Counter(p if isinstance(p, str) else p.name for p in profiles)
    unknown = [n for n in names if model.profile(n) is None]
    if unknown:
        raise MigPlanError(f"{', '.join(unknown)}: not an {model.name} profile")
    return tuple(names.get(p.name, 0) for p in model.profiles)


def pack_profiles(
    gpu_model: str | GpuModel, profiles: Iterable[Profile | str], gpus: int = 1
) -> list[list[tuple[str, int]]] | None:
    """The planner's layout for a list of profiles on ``gpus`` GPUs: per GPU (profile, start); None if none."""
    model = get_model(gpu_model)
    demand = _vector(model, profiles)
    fewest = _min_gpus(model.key, demand, gpus)
    if fewest is None:
        return None
    return [list(gpu) for gpu in _layout_of(model, demand, fewest)]


def min_gpus(
    gpu_model: str | GpuModel, profiles: Iterable[Profile | str], limit: int = MAX_GPUS
) -> int | None:
    """The fewest GPUs that hold these profiles, or None when that is more than ``limit``."""
    model = get_model(gpu_model)
    return _min_gpus(model.key, _vector(model, profiles), limit)


# -- the plan -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Instance:
    gpu: int
    profile: Profile
    start: int
    tenant: str | None
    instance: int  # 1-based within its tenant
    ordinal: int  # 1-based among this GPU's instances of this profile: its line in `nvidia-smi -L`

    @property
    def slots(self) -> range:
        return range(self.start, self.start + self.profile.size)

    @property
    def uuid_placeholder(self) -> str:
        return f"MIG-<uuid of GPU{self.gpu} {self.profile.name} #{self.ordinal}>"

    @property
    def lookup(self) -> str:
        return f"$(mig_uuid {self.gpu} {self.profile.name} {self.ordinal})"

    def to_json(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "profile": self.profile.name,
            "profile_id": self.profile.profile_id,
            "start": self.start,
            "size": self.profile.size,
            "slots": list(self.slots),
            "tenant": self.tenant,
            "instance": self.instance,
            "ordinal": self.ordinal,
            "cuda_visible_devices": self.uuid_placeholder,
            "lookup": self.lookup,
        }


@dataclass(frozen=True)
class GpuLayout:
    gpu: int
    instances: tuple[Instance, ...]
    stranded: tuple[int, ...]  # free memory slices no further instance could use

    @property
    def memory_used(self) -> int:
        return sum(i.profile.memory_slices for i in self.instances)

    @property
    def compute_used(self) -> int:
        return sum(i.profile.compute_slices for i in self.instances)

    @property
    def free_slots(self) -> tuple[int, ...]:
        used = {s for i in self.instances for s in i.slots}
        return tuple(s for s in range(MEMORY_SLICES) if s not in used)

    def slot_map(self) -> str:
        """One character per memory slice: a letter per instance (in slot order), '.' free, 'x' stranded."""
        chars = ["."] * MEMORY_SLICES
        for letter, instance in zip("ABCDEFGH", sorted(self.instances, key=lambda i: i.start), strict=False):
            for slot in instance.slots:
                chars[slot] = letter
        for slot in self.stranded:
            chars[slot] = "x"
        return "".join(chars)

    def creation_order(self) -> list[Instance]:
        """Most constrained placements first: the order in which bare `-cgi` IDs would also land right."""
        return sorted(self.instances, key=lambda i: (len(i.profile.starts), -i.profile.size, i.start))

    def to_json(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "map": self.slot_map(),
            "instances": [i.to_json() for i in sorted(self.instances, key=lambda i: i.start)],
            "memory_slices_used": self.memory_used,
            "compute_slices_used": self.compute_used,
            "free_slots": list(self.free_slots),
            "stranded_slots": list(self.stranded),
        }


@dataclass(frozen=True)
class Alternative:
    kind: str  # more-gpus, drop, smaller, merge, share
    summary: str
    gpus: int | None = None
    layout: tuple[tuple[tuple[str, int], ...], ...] = ()

    def layout_text(self) -> str:
        return "; ".join(
            f"GPU{g}: " + " + ".join(f"{name}@{start}" for name, start in gpu)
            for g, gpu in enumerate(self.layout)
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "summary": self.summary,
            "gpus": self.gpus,
            "layout": [[{"profile": n, "start": s} for n, s in gpu] for gpu in self.layout],
        }


OBJECTIVE = (
    "least waste: (1) each tenant instance gets the smallest profile that meets its need (a smaller profile "
    "never blocks a placement that a larger one allows on these GPUs, so this hands out the fewest slices); "
    "(2) the instances go on the fewest GPUs, leaving whole GPUs free; (3) on each GPU the start slots keep "
    "the free memory slices usable by another instance (fewest stranded slices), then able to take the most "
    "compute"
)


@dataclass
class MigPlan:
    model: GpuModel
    gpus: int
    demands: list[TenantDemand]
    valid: bool
    layouts: list[GpuLayout] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    alternatives: list[Alternative] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    host_cpus: int | None = None
    host_memory_gb: float | None = None
    context_gb: float = CONTEXT_GB  # the CUDA context reserve added to each memory need

    # -- figures --

    def instances(self, tenant: str | None = None) -> list[Instance]:
        found = [i for layout in self.layouts for i in layout.instances]
        found = [i for i in found if tenant is None or i.tenant == tenant]
        return sorted(found, key=lambda i: (i.tenant or "", i.instance, i.gpu, i.start))

    def summary(self) -> dict[str, Any]:
        used = [layout for layout in self.layouts if layout.instances]
        memory = sum(layout.memory_used for layout in used)
        # memory beyond each need and its CUDA context reserve
        over = sum((d.headroom_gb or 0.0) * d.spec.count for d in self.demands if d.profile is not None)
        return {
            "gpus_used": len(used),
            "gpus_free": self.gpus - len(used) if self.valid else None,
            "instances": sum(len(layout.instances) for layout in used),
            "memory_slices_used": memory,
            "memory_slices_free": MEMORY_SLICES * len(used) - memory,
            "stranded_slices": sum(len(layout.stranded) for layout in used),
            "compute_slices_used": sum(layout.compute_used for layout in used),
            "compute_slices_free": COMPUTE_SLICES * len(used) - sum(layout.compute_used for layout in used),
            "free_gb": round((MEMORY_SLICES * len(used) - memory) * self.model.gb_per_slice, 1),
            "free_gb_usable": round((MEMORY_SLICES * len(used) - memory) * self.model.slice_gb, 1),
            "over_allocated_gb": round(over, 1),
        }

    def headline(self) -> str:
        if not self.valid:
            return f"NOT a valid MIG layout on {self.gpus} x {self.model.name}"
        s = self.summary()
        used = s["gpus_used"]
        text = (
            f"valid MIG layout: {_plural(s['instances'], 'instance')} on {used} of {_plural(self.gpus, 'GPU')}; "
            f"{s['memory_slices_used']}/{MEMORY_SLICES * used} memory slices and "
            f"{s['compute_slices_used']}/{COMPUTE_SLICES * used} compute slices used"
        )
        if s["memory_slices_free"]:
            text += f"; {_plural(s['memory_slices_free'], 'memory slice')} (~{s['free_gb_usable']:g} GB) free"
            if s["stranded_slices"]:
                text += f", {s['stranded_slices']} of them stranded"
        return text

    # -- what a person runs --

    def commands(self) -> list[str]:
        """The nvidia-smi commands that would create the layout, in a working order, with comments."""
        used = [layout for layout in self.layouts if layout.instances]
        if not self.valid or not used:
            return []
        ids = ",".join(str(layout.gpu) for layout in used)
        lines = [
            "# Review, then run as root. dgxperf ran none of this.",
            "# 1. MIG mode on: the GPUs must be idle (on DGX stop nvsm and dcgm first); an A100 may need a GPU",
            "#    reset or a reboot before `nvidia-smi -q` shows MIG mode Current: Enabled",
            f"sudo nvidia-smi -i {ids} -mig 1",
            "# 2. remove the instances there now (destroys them and whatever runs on them)",
        ]
        for layout in used:
            lines += [
                f"sudo nvidia-smi mig -i {layout.gpu} -dci",
                f"sudo nvidia-smi mig -i {layout.gpu} -dgi",
            ]
        lines += [
            "# 3. create the GPU instances with their default compute instance (-C), each pinned to its planned",
            "#    start slot as PROFILE_ID:START: without :START the driver picks the slot and some layouts then",
            "#    fail (3g.20gb + 4 x 1g.5gb needs the 3g at slot 4); most constrained placements first",
        ]
        for layout in used:
            tuples = ",".join(f"{i.profile.profile_id}:{i.start}" for i in layout.creation_order())
            names = " ".join(f"{i.profile.name}@{i.start}" for i in layout.creation_order())
            lines += [f"# GPU{layout.gpu}: {names}", f"sudo nvidia-smi mig -i {layout.gpu} -cgi {tuples} -C"]
        lines += ["# 4. check: Placement Start:Size must match the plan; then read the MIG UUIDs"]
        lines += [f"nvidia-smi mig -i {layout.gpu} -lgi" for layout in used]
        lines.append("nvidia-smi -L")
        return lines

    def cuda_lines(self) -> list[str]:
        """CUDA_VISIBLE_DEVICES per tenant instance, through a lookup of `nvidia-smi -L` once they exist."""
        if not self.valid:
            return []
        lines = [
            "# MIG UUIDs exist only after step 3. Instances of the same profile on a GPU are identical, so a",
            "# tenant's instance is simply the k-th 'MIG <profile>' line under 'GPU <i>:' in `nvidia-smi -L`.",
            "# One MIG device per process: a CUDA process uses a single MIG instance.",
            "mig_uuid() {  # GPU index, profile, k",
            '  nvidia-smi -L | awk -v gpu="GPU $1:" -v prof="MIG $2 " -v k="$3" \'',
            '    index($0, "GPU ") == 1 { on = (index($0, gpu) == 1); next }',
            "    on && index($0, prof) && ++n == k { match($0, /MIG-[^)]+/); print substr($0, RSTART, RLENGTH) }'",
            "}",
        ]
        for demand in self.demands:
            for inst in self.instances(demand.spec.name):
                lines.append(
                    f"# {demand.spec.name} #{inst.instance}: GPU{inst.gpu} {inst.profile.name}@{inst.start} "
                    f"-> {inst.uuid_placeholder}"
                )
                lines.append(f"CUDA_VISIBLE_DEVICES={inst.lookup}")
        return lines

    def tenant_share(self, demand: TenantDemand) -> float:
        """The tenant's share of the host: its compute slices over all compute slices of the planned GPUs."""
        compute = sum(i.profile.compute_slices for i in self.instances(demand.spec.name))
        return compute / (COMPUTE_SLICES * self.gpus)

    def slice_units(self) -> dict[str, dict[str, Any]]:
        """A systemd slice (cgroup v2) per tenant: CPUQuota and MemoryMax in proportion to compute slices."""
        if not self.valid or self.host_cpus is None or self.host_memory_gb is None:
            return {}
        units: dict[str, dict[str, Any]] = {}
        for demand in self.demands:
            found = self.instances(demand.spec.name)
            if not found:
                continue
            share = self.tenant_share(demand)
            compute = sum(i.profile.compute_slices for i in found)
            cpus = self.host_cpus * share
            quota = max(1, math.floor(cpus * 100))
            memory_mib = max(1, math.floor(self.host_memory_gb * GB * share / 2**20))
            unit = "mig_" + re.sub(r"[^A-Za-z0-9_]", "_", demand.spec.name) + ".slice"
            where = ", ".join(sorted({f"GPU{i.gpu}" for i in found}))
            text = "\n".join(
                [
                    f"# /etc/systemd/system/{unit}",
                    f"# {demand.spec.name}: {len(found)} x {found[0].profile.name} on {where} = {compute} of the "
                    f"{COMPUTE_SLICES * self.gpus} compute slices of {_plural(self.gpus, 'GPU')}",
                    f"# -> {share:.1%} of {self.host_cpus} host CPUs ({cpus:.1f}) and of "
                    f"{self.host_memory_gb:g} GB host memory ({self.host_memory_gb * share:.1f} GB)",
                    "[Unit]",
                    f"Description=MIG tenant {demand.spec.name} ({len(found)} x {found[0].profile.name}), "
                    "planned by dgxperf plan mig",
                    "",
                    "[Slice]",
                    "CPUAccounting=yes",
                    f"CPUQuota={quota}%",
                    "MemoryAccounting=yes",
                    f"MemoryMax={memory_mib}M",
                ]
            )
            # one process per instance, all of them in the tenant's slice
            run = [
                f"sudo systemd-run --slice={unit} --setenv=CUDA_VISIBLE_DEVICES={inst.lookup} -- COMMAND"
                for inst in found
            ]
            units[demand.spec.name] = {"unit": unit, "text": text, "run": run}
        return units

    def to_json(self) -> dict[str, Any]:
        tenants = []
        for demand in self.demands:
            entry = demand.spec.to_json()
            entry.update(
                assigned_profile=demand.profile.name if demand.profile else None,
                profile_id=demand.profile.profile_id if demand.profile else None,
                usable_gib=demand.profile.memory_gib if demand.profile else None,
                why=demand.why,
                context_gb=demand.context_gb,
                headroom_gb=None if demand.headroom_gb is None else round(demand.headroom_gb, 3),
                tight=demand.tight,
                instances=[i.to_json() for i in self.instances(demand.spec.name)],
            )
            tenants.append(entry)
        return {
            "schema": PLAN_SCHEMA,
            "gpu_model": {"key": self.model.key, "name": self.model.name, "source": self.model.source},
            "gpus": self.gpus,
            "context_gb": self.context_gb,
            "valid": self.valid,
            "headline": self.headline(),
            "objective": OBJECTIVE,
            "tenants": tenants,
            "layout": [layout.to_json() for layout in self.layouts],
            "summary": self.summary(),
            "reasons": self.reasons,
            "alternatives": [a.to_json() for a in self.alternatives],
            "notes": self.notes,
            "commands": self.commands(),
            "cuda_visible_devices": self.cuda_lines(),
            "host": {"cpus": self.host_cpus, "memory_gb": self.host_memory_gb},
            "systemd": self.slice_units(),
        }


def plan_mig(
    gpu_model: str | GpuModel,
    tenants: str | Sequence[TenantSpec],
    *,
    gpus: int = 1,
    host_cpus: int | None = None,
    host_memory_gb: float | None = None,
    context_gb: float = CONTEXT_GB,
) -> MigPlan:
    """Plan MIG instances for ``tenants`` on ``gpus`` GPUs of one model; MigPlanError for bad input.

    ``context_gb`` is the CUDA context reserve added to each tenant instance's memory need (0: none).
    """
    model = get_model(gpu_model)
    if not 1 <= gpus <= MAX_GPUS:
        raise MigPlanError(f"--gpus {gpus}: plan 1 to {MAX_GPUS} GPUs (one node) at a time")
    context_gb = _check_context(context_gb)
    specs = parse_tenants(tenants) if isinstance(tenants, str) else list(tenants)
    demands = [resolve_tenant(model, spec, context_gb=context_gb) for spec in specs]
    plan = MigPlan(
        model,
        gpus,
        demands,
        valid=False,
        host_cpus=host_cpus,
        host_memory_gb=host_memory_gb,
        context_gb=context_gb,
    )
    plan.notes += [_tight_note(d) for d in demands if d.tight]
    missing = [d for d in demands if d.profile is None]
    placed = [d for d in demands if d.profile is not None]
    vector = _demand_vector(model, placed)
    if not missing and _fits(model, vector, gpus):
        plan.valid = True
        plan.layouts = _assign(model, placed, gpus)
        for layout in plan.layouts:
            if layout.stranded:
                plan.notes.append(_stranded_note(model, layout))
        free = [layout.gpu for layout in plan.layouts if not layout.instances]
        if free:
            plan.notes.append(
                f"GPU{', GPU'.join(str(g) for g in free)}: no instance needed; leave MIG off there (whole GPU)"
            )
        return plan
    plan.reasons = [f"{d.spec.name}: {d.why}" for d in missing]
    if not _fits(model, vector, gpus):
        plan.reasons += _why_not(model, placed, gpus)
    plan.alternatives = _alternatives(model, demands, gpus)
    if context_gb:
        plan.notes += _without_context_note(model, demands, gpus, context_gb)
    return plan


def _tight_note(d: TenantDemand) -> str:
    assert d.profile is not None and d.headroom_gb is not None
    text = f"{d.spec.name}: tight fit, a {d.need_text()} need in {d.profile.name}'s {_mem(d.profile)}: "
    if d.context_gb:
        text += (
            f"{d.headroom_gb:.2f} GB to spare for allocator fragmentation and a CUDA context larger than the "
            f"{_num(d.context_gb)} GB reserved"
        )
    else:
        text += (
            f"{d.headroom_gb:.2f} GB to spare, and the CUDA context alone takes a few hundred MB of the "
            "instance's memory (--context-gb 0: no reserve for it)"
        )
    return text + "; measure the job's peak, or ask for more memory"


def _without_context_note(
    model: GpuModel, demands: Sequence[TenantDemand], gpus: int, context_gb: float
) -> list[str]:
    """When the CUDA context reserve alone is what rules the layout out: what it would be without it."""
    bare = [resolve_tenant(model, d.spec, context_gb=0.0) for d in demands]
    if any(d.profile is None for d in bare) or not _fits(model, _demand_vector(model, bare), gpus):
        return []
    changed = [
        f"{b.spec.name} in {b.profile.name} ({_mem(b.profile)}) with only {b.headroom_gb:.2f} GB to spare per "
        "instance"
        for d, b in zip(demands, bare, strict=True)
        if b.profile is not None and b.profile != d.profile and b.headroom_gb is not None
    ]
    return [
        f"with --context-gb 0 (no CUDA context reserve) this would be a valid layout on "
        f"{_plural(gpus, 'GPU')}: {'; '.join(changed)}, less than the {_num(context_gb)} GB reserved for the "
        "CUDA context each process pays for out of its instance's memory; do so only if the measured peak, "
        "context included (nvidia-smi on the instance), fits"
    ]


def _demand_vector(model: GpuModel, demands: Sequence[TenantDemand]) -> tuple[int, ...]:
    return _vector(model, [d.profile for d in demands if d.profile for _ in range(d.spec.count)])


def _assign(model: GpuModel, demands: Sequence[TenantDemand], gpus: int) -> list[GpuLayout]:
    """Put the tenants' instances on the packed layout: per profile, tenants in order onto slots in order."""
    vector = _demand_vector(model, demands)
    fewest = _min_gpus(model.key, vector, gpus)
    assert fewest is not None
    slots: dict[str, list[tuple[int, int]]] = {}
    for gpu, placed in enumerate(_layout_of(model, vector, fewest)):
        for name, start in placed:
            slots.setdefault(name, []).append((gpu, start))
    per_gpu: dict[int, list[Instance]] = {g: [] for g in range(gpus)}
    ordinals: Counter[tuple[int, str]] = Counter()
    for d in demands:
        assert d.profile is not None
        for number in range(1, d.spec.count + 1):
            gpu, start = slots[d.profile.name].pop(0)
            per_gpu[gpu].append(Instance(gpu, d.profile, start, d.spec.name, number, 0))
    layouts = []
    for gpu in range(gpus):
        # the k-th instance of a profile in slot order is the k-th line of that profile in `nvidia-smi -L`;
        # which physical one a tenant gets does not matter, only that no two tenants get the same one
        numbered = []
        for inst in sorted(per_gpu[gpu], key=lambda i: i.start):
            ordinals[(gpu, inst.profile.name)] += 1
            numbered.append(
                Instance(
                    inst.gpu,
                    inst.profile,
                    inst.start,
                    inst.tenant,
                    inst.instance,
                    ordinals[(gpu, inst.profile.name)],
                )
            )
        used = 0
        for inst in numbered:
            used |= _mask(inst.start, inst.profile.size)
        free = _mask(0, MEMORY_SLICES) & ~used
        stranded = _stranded_slots(model, free) if numbered else ()
        layouts.append(GpuLayout(gpu, tuple(numbered), stranded))
    return layouts


def _stranded_slots(model: GpuModel, free: int) -> tuple[int, ...]:
    """Free slots that no set of further instances can cover."""
    coverable = 0
    for profile in model.profiles:
        for start in profile.starts:
            mask = _mask(start, profile.size)
            if free & mask == mask:
                coverable |= mask
    return tuple(s for s in range(MEMORY_SLICES) if free >> s & 1 and not coverable >> s & 1)


def _stranded_note(model: GpuModel, layout: GpuLayout) -> str:
    slots = ", ".join(str(s) for s in layout.stranded)
    reach = sorted(
        {
            f"{p.name}@{s}"
            for p in model.profiles
            for s in p.starts
            for slot in layout.stranded
            if s <= slot < s + p.size and not p.media
        }
    )
    text = f"GPU{layout.gpu}: memory slice {slots} stays unused; only {', '.join(reach)} could use it"
    if layout.stranded == (MEMORY_SLICES - 1,):
        text += (
            " (MIG has 7 compute slices but 8 memory slices: 1g profiles start at slots 0-6, so after seven "
            "1-slice instances the eighth memory slice has no taker)"
        )
    return text


# -- no layout: why, and the nearest valid alternatives -------------------------------------------------------------


def _why_not(model: GpuModel, demands: Sequence[TenantDemand], gpus: int) -> list[str]:
    demand = _demand_vector(model, demands)
    if not any(demand):
        return []
    profiles = model.profiles
    on = f"{gpus} GPUs have" if gpus > 1 else "1 GPU has"
    reasons = []
    used = [(c, p) for c, p in zip(demand, profiles, strict=True) if c]
    memory = sum(c * p.memory_slices for c, p in used)
    if memory > MEMORY_SLICES * gpus:
        parts = " + ".join(
            f"{c} x {p.name} ({p.memory_slices} slice{'s' if p.memory_slices > 1 else ''})" for c, p in used
        )
        reasons.append(f"memory: {parts} = {memory} memory slices; {on} {MEMORY_SLICES * gpus}")
    compute = sum(c * p.compute_slices for c, p in used)
    if compute > COMPUTE_SLICES * gpus:
        parts = " + ".join(f"{c} x {p.short}" for c, p in used)
        reasons.append(f"compute: {parts} = {compute} compute slices; {on} {COMPUTE_SLICES * gpus}")
    count = sum(demand)
    if count > COMPUTE_SLICES * gpus:
        reasons.append(f"instances: {count}; a GPU holds at most {COMPUTE_SLICES} (one per compute slice)")
    for c, p in used:
        if c > p.max_instances * gpus:
            starts = ",".join(str(s) for s in p.starts)
            reasons.append(
                f"{c} x {p.name}: at most {p.max_instances} per GPU ({p.placements}: starts {starts}, "
                f"{p.size} slice{'s' if p.size > 1 else ''} each)"
                + (f", {p.max_instances * gpus} on {gpus} GPUs" if gpus > 1 else "")
            )
    slot0 = [(c, p) for c, p in used if p.starts == (0,)]
    if sum(c for c, _ in slot0) > gpus and len(slot0) > 1:
        names = " and ".join(p.name for _, p in slot0)
        reasons.append(f"{names} both start only at slot 0: one of them per GPU")
    if reasons:
        return reasons
    needed = _min_gpus(model.key, demand)
    # On one GPU the counts above decide (every count-feasible set has a placement; the tests check it), so
    # this is a split over several GPUs that no GPU's share allows.
    return [
        f"split: the slice counts add up, but no split of the instances over {_plural(gpus, 'GPU')} gives every GPU a "
        f"share it can hold; they need {needed or f'more than {MAX_GPUS}'} GPUs"
    ]


def _fits(model: GpuModel, demand: tuple[int, ...], gpus: int) -> bool:
    return _can_pack(model.key, demand, gpus) is not None


def _layout_of(
    model: GpuModel, demand: tuple[int, ...], gpus: int
) -> tuple[tuple[tuple[str, int], ...], ...]:
    """Per GPU (profile, start) pairs of a demand that fits on ``gpus`` GPUs."""
    catalog = _catalog(model.key)
    configs = _can_pack(model.key, demand, gpus)
    assert configs is not None
    return tuple(tuple((model.profiles[i].name, s) for i, s in catalog.best[config]) for config in configs)


def _with(
    model: GpuModel, demands: Sequence[TenantDemand], replace: Mapping[str, tuple[Profile, int]]
) -> tuple[int, ...]:
    profiles: list[Profile] = []
    for d in demands:
        profile, count = replace.get(d.spec.name, (d.profile, d.spec.count)) if d.profile else (None, 0)
        if profile is not None:
            profiles += [profile] * count
    return _vector(model, profiles)


# Leaving instances out is tried with 1, 2, ... instances; past this many candidate sets the plan offers
# the other alternatives only, so a large infeasible request still answers at once.
_DROP_SEARCH_LIMIT = 4000


def _alternatives(model: GpuModel, demands: Sequence[TenantDemand], gpus: int) -> list[Alternative]:
    placed = [d for d in demands if d.profile is not None]
    missing = [d.spec.name for d in demands if d.profile is None]
    demand = _demand_vector(model, placed)
    without = f" (without {', '.join(missing)})" if missing else ""
    found: list[Alternative] = []

    def add(alternative: Alternative) -> None:
        if not any(a.kind == alternative.kind and a.layout == alternative.layout for a in found):
            found.append(alternative)

    if any(demand):
        needed = _min_gpus(model.key, demand)
        if needed is None:
            add(
                Alternative(
                    "more-gpus",
                    f"even {MAX_GPUS} GPUs (one node) are not enough{without}: at least "
                    f"{max(MAX_GPUS + 1, _lower_bound(model, demand))} GPUs, so plan the tenants node by node",
                )
            )
        elif needed > gpus:
            add(
                Alternative(
                    "more-gpus",
                    f"use {needed} GPUs (--gpus {needed}){without}",
                    needed,
                    _layout_of(model, demand, needed),
                )
            )
        elif missing:
            add(
                Alternative(
                    "drop",
                    f"the other tenants fit on {_plural(gpus, 'GPU')} without {', '.join(missing)}",
                    gpus,
                    _layout_of(model, demand, gpus),
                )
            )
    for alternative in _drop_alternatives(model, placed, gpus, without):
        add(alternative)
    for d in placed:
        assert d.profile is not None
        chain = _chain(model, d.profile.media)
        position = chain.index(d.profile) if d.profile in chain else 0
        if position == 0:
            continue
        smaller = chain[position - 1]
        vector = _with(model, placed, {d.spec.name: (smaller, d.spec.count)})
        if _fits(model, vector, gpus):
            has = f"{_mem(smaller)}, {smaller.sms} SMs"
            if d.context_gb:
                has += (
                    f", CUDA context included: {smaller.memory_gb - d.context_gb:.2f} GB besides the "
                    f"{_num(d.context_gb)} GB context"
                )
            condition = (
                f"only if it can do with {has} (it asked for {d.spec.need_text()})"
                if d.spec.is_need
                else f"{has} instead of {_mem(d.profile)}, {d.profile.sms} SMs"
            )
            add(
                Alternative(
                    "smaller",
                    f"give {d.spec.name} {smaller.name} instead of {d.profile.name}: {condition}{without}",
                    gpus,
                    _layout_of(model, vector, gpus),
                )
            )
    for d in placed:
        if d.spec.count < 2:
            continue
        assert d.profile is not None
        # the merged processes share one instance's SMs, so only the memory adds up (each with its context)
        need = d.need_gb
        memory = d.spec.count * (need if need is not None else d.profile.memory_gb)
        compute = d.spec.compute if d.spec.is_need and d.spec.compute else d.profile.compute_slices
        merged = next(
            (
                p
                for p in _chain(model, d.profile.media)
                if p.memory_gb >= memory and p.compute_slices >= compute and p.sms >= (d.spec.sms or 0)
            ),
            None,
        )
        if merged is None:
            continue
        vector = _with(model, placed, {d.spec.name: (merged, 1)})
        if _fits(model, vector, gpus):
            add(
                Alternative(
                    "merge",
                    f"merge {d.spec.name}'s {d.spec.count} instances into one {merged.name} ({_mem(merged)}, "
                    f"{merged.sms} SMs) that its {d.spec.count} processes share with CUDA MPS (MPS runs inside a MIG "
                    f"instance; they lose memory and fault isolation from each other){without}",
                    gpus,
                    _layout_of(model, vector, gpus),
                )
            )
    add(
        Alternative(
            "share",
            "or keep MIG for the tenants that fit and run the rest together on one instance with CUDA MPS or "
            "time-slicing: no memory or fault isolation between those, and they compete for its SMs",
        )
    )
    return found


def _drop_alternatives(
    model: GpuModel, demands: Sequence[TenantDemand], gpus: int, without: str
) -> list[Alternative]:
    """The fewest instances to leave out so the rest fits; prefer taking them from the biggest tenants."""
    counts = [d.spec.count for d in demands]

    def kept(drop: Sequence[int]) -> tuple[int, ...]:
        return _vector(
            model,
            [
                d.profile
                for d, c, r in zip(demands, counts, drop, strict=True)
                if d.profile
                for _ in range(c - r)
            ],
        )

    tried = 0
    for dropped in range(1, sum(counts)):
        options: list[tuple[float, tuple[int, ...]]] = []
        for drop in _compositions(dropped, counts):
            tried += 1
            if tried > _DROP_SEARCH_LIMIT:
                return []
            if _fits(model, kept(drop), gpus):
                options.append((max(r / c for r, c in zip(drop, counts, strict=True)), drop))
        if options:
            found = []
            for _, drop in sorted(options)[:2]:
                parts = [
                    f"{r} of {d.spec.name}'s {d.spec.count} instances" if d.spec.count > 1 else d.spec.name
                    for d, r in zip(demands, drop, strict=True)
                    if r
                ]
                found.append(
                    Alternative(
                        "drop",
                        f"leave out {' and '.join(parts)}{without}: the rest fits on {_plural(gpus, 'GPU')}; "
                        "run what is left out elsewhere or shared (MPS/time-slicing)",
                        gpus,
                        _layout_of(model, kept(drop), gpus),
                    )
                )
            return found
    return []


def _compositions(total: int, limits: Sequence[int]) -> Iterable[tuple[int, ...]]:
    """Every way to take ``total`` items from bins with these sizes."""
    if not limits:
        if total == 0:
            yield ()
        return
    for first in range(min(total, limits[0]), -1, -1):
        for rest in _compositions(total - first, limits[1:]):
            yield (first, *rest)
