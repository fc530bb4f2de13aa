"""MIG planning: NVIDIA's tables, the validator, the parser, and the planner held against brute force.

The brute force here shares no code with the planner: it tries start slots one instance at a time and asks
``check_layout`` (which reads nvidia-smi's ``{starts}:size`` strings itself) whether the result is valid.
"""

from __future__ import annotations

import functools
import itertools
import json
import random
import re
from collections.abc import Sequence

import pytest

from dgxperf.plan.mig import (
    CONTEXT_GB,
    GPU_MODELS,
    MAX_INSTANCES,
    MigPlan,
    MigPlanError,
    Profile,
    check_layout,
    get_model,
    min_gpus,
    pack_profiles,
    parse_tenants,
    plan_mig,
    resolve_tenant,
)

# -- an independent brute force ---------------------------------------------------------------------------------


def prof(model_key: str, name: str) -> Profile:
    profile = get_model(model_key).profile(name)
    assert profile is not None, name
    return profile


def assigned(plan: MigPlan) -> list[str]:
    return [d.profile.name if d.profile else "-" for d in plan.demands]


def _starts_and_size(placements: str) -> tuple[list[int], int]:
    match = re.fullmatch(r"\{([\d,]+)\}:(\d)", placements)
    assert match, placements
    return [int(s) for s in match.group(1).split(",")], int(match.group(2))


@functools.cache
def _brute_place(model_key: str, ordered: tuple[str, ...]) -> tuple[tuple[str, int], ...] | None:
    if sum(prof(model_key, n).memory_slices for n in ordered) > 8:
        return None  # slices never overlap: no need to try
    rules = {n: _starts_and_size(prof(model_key, n).placements) for n in set(ordered)}

    def place(i: int, used: set[int], chosen: list[tuple[str, int]]) -> list[tuple[str, int]] | None:
        if i == len(ordered):
            return chosen if not check_layout(model_key, chosen) else None
        starts, size = rules[ordered[i]]
        # identical profiles are interchangeable: give them increasing starts only
        low = chosen[-1][1] + 1 if i and ordered[i - 1] == ordered[i] else 0
        for start in starts:
            slots = set(range(start, start + size))
            if start < low or slots & used or start + size > 8:
                continue
            found = place(i + 1, used | slots, [*chosen, (ordered[i], start)])
            if found is not None:
                return found
        return None

    found = place(0, set(), [])
    return None if found is None else tuple(found)


def brute_place(model_key: str, names: Sequence[str]) -> list[tuple[str, int]] | None:
    """Some valid placement of these profiles on one GPU, found by trying start slots; None if there is none."""
    found = _brute_place(model_key, tuple(sorted(names)))
    return None if found is None else list(found)


def brute_min_gpus(model_key: str, names: Sequence[str], limit: int) -> int | None:
    """The fewest GPUs (<= limit) over which some split of the profiles has a valid placement on each GPU."""
    items = sorted(names, key=lambda n: -prof(model_key, n).memory_slices)
    for gpus in range(1, limit + 1):
        bins: list[list[str]] = [[] for _ in range(gpus)]

        def split(i: int, bins: list[list[str]] = bins, gpus: int = gpus) -> bool:
            if i == len(items):
                return all(brute_place(model_key, b) is not None for b in bins)
            seen_empty = False
            for b in bins:
                if not b:
                    if seen_empty:
                        continue  # empty GPUs are interchangeable
                    seen_empty = True
                slices = sum(prof(model_key, n).memory_slices for n in [*b, items[i]])
                if slices > 8:
                    continue
                b.append(items[i])
                if split(i + 1):
                    return True
                b.pop()
            return False

        if split(0):
            return gpus
    return None


@functools.cache
def _brute_min_gpus(model_key: str, names: tuple[str, ...], limit: int) -> int | None:
    return brute_min_gpus(model_key, names, limit)


def multisets(names: Sequence[str], most: int) -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = []
    for size in range(1, most + 1):
        found += list(itertools.combinations_with_replacement(names, size))
    return found


def profile_names(model_key: str) -> list[str]:
    return [p.name for p in get_model(model_key).profiles]


# -- NVIDIA's tables ------------------------------------------------------------------------------------------------

# (name, ID, compute slices, memory slices, SMs, max instances, placements): MIG User Guide "Supported MIG
# Profiles" and `nvidia-smi mig -lgip`/`-lgipp` outputs (see the sources in dgxperf/plan/mig.py).
EXPECTED = {
    "a100-40gb": [
        ("1g.5gb", 19, 1, 1, 14, 7, "{0,1,2,3,4,5,6}:1"),
        ("1g.5gb+me", 20, 1, 1, 14, 1, "{0,1,2,3,4,5,6}:1"),
        ("1g.10gb", 15, 1, 2, 14, 4, "{0,2,4,6}:2"),
        ("2g.10gb", 14, 2, 2, 28, 3, "{0,2,4}:2"),
        ("3g.20gb", 9, 3, 4, 42, 2, "{0,4}:4"),
        ("4g.20gb", 5, 4, 4, 56, 1, "{0}:4"),
        ("7g.40gb", 0, 7, 8, 98, 1, "{0}:8"),
    ],
    "a100-80gb": [
        ("1g.10gb", 19, 1, 1, 14, 7, "{0,1,2,3,4,5,6}:1"),
        ("1g.10gb+me", 20, 1, 1, 14, 1, "{0,1,2,3,4,5,6}:1"),
        ("1g.20gb", 15, 1, 2, 14, 4, "{0,2,4,6}:2"),
        ("2g.20gb", 14, 2, 2, 28, 3, "{0,2,4}:2"),
        ("3g.40gb", 9, 3, 4, 42, 2, "{0,4}:4"),
        ("4g.40gb", 5, 4, 4, 56, 1, "{0}:4"),
        ("7g.80gb", 0, 7, 8, 98, 1, "{0}:8"),
    ],
    "h100-80gb": [
        ("1g.10gb", 19, 1, 1, 16, 7, "{0,1,2,3,4,5,6}:1"),
        ("1g.10gb+me", 20, 1, 1, 16, 1, "{0,1,2,3,4,5,6}:1"),
        ("1g.20gb", 15, 1, 2, 26, 4, "{0,2,4,6}:2"),
        ("2g.20gb", 14, 2, 2, 32, 3, "{0,2,4}:2"),
        ("3g.40gb", 9, 3, 4, 60, 2, "{0,4}:4"),
        ("4g.40gb", 5, 4, 4, 64, 1, "{0}:4"),
        ("7g.80gb", 0, 7, 8, 132, 1, "{0}:8"),
    ],
    "h200-141gb": [
        ("1g.18gb", 19, 1, 1, 16, 7, "{0,1,2,3,4,5,6}:1"),
        ("1g.18gb+me", 20, 1, 1, 16, 1, "{0,1,2,3,4,5,6}:1"),
        ("1g.35gb", 15, 1, 2, 26, 4, "{0,2,4,6}:2"),
        ("2g.35gb", 14, 2, 2, 32, 3, "{0,2,4}:2"),
        ("3g.71gb", 9, 3, 4, 60, 2, "{0,4}:4"),
        ("4g.71gb", 5, 4, 4, 64, 1, "{0}:4"),
        ("7g.141gb", 0, 7, 8, 132, 1, "{0}:8"),
    ],
}


@pytest.mark.parametrize("key", GPU_MODELS)
def test_profile_tables_match_nvidia(key: str) -> None:
    got = [
        (p.name, p.profile_id, p.compute_slices, p.memory_slices, p.sms, p.max_instances, p.placements)
        for p in get_model(key).profiles
    ]
    assert got == EXPECTED[key]


@pytest.mark.parametrize("key", GPU_MODELS)
def test_tables_are_self_consistent(key: str) -> None:
    model = get_model(key)
    for p in model.profiles:
        starts, size = _starts_and_size(p.placements)
        assert size == p.memory_slices
        assert all(s + size <= 8 for s in starts)
        # the maximum count is what fits side by side, except that only one +me exists per GPU
        side_by_side = len({s // size for s in starts}) if size > 1 else len(starts)
        assert p.max_instances == (1 if p.media else side_by_side), p.name
        assert p.compute_slices <= p.memory_slices
    by_size = sorted(
        (p for p in model.profiles if not p.media), key=lambda p: (p.memory_slices, p.compute_slices)
    )
    for small, big in itertools.pairwise(by_size):
        # the planner's "smallest profile wins" rests on this chain: a smaller profile can stand wherever a
        # bigger one stands, inside its slices, with no less of anything it was chosen for
        small_starts, _ = _starts_and_size(small.placements)
        big_starts, _ = _starts_and_size(big.placements)
        assert set(big_starts) <= set(small_starts), (small.name, big.name)
        assert small.memory_gib <= big.memory_gib and small.sms <= big.sms
        assert small.compute_slices <= big.compute_slices and small.memory_slices <= big.memory_slices
    assert model.profiles[-1].memory_slices == 8 and model.profiles[-1].compute_slices == 7


def test_memory_is_what_nvidia_smi_reports_not_the_name() -> None:
    a100 = get_model("a100-80gb").profile("1g.10gb")
    assert a100 is not None and a100.memory_gib == 9.50 and round(a100.memory_gb, 2) == 10.20
    h200 = get_model("h200-141gb").profile("1g.35gb")
    assert h200 is not None and h200.memory_gib == 32.25 and h200.memory_gb < 35


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("A100-SXM4-40GB", "a100-40gb"),
        ("a100-80gb", "a100-80gb"),
        ("H200", "h200-141gb"),
        ("h100", "h100-80gb"),
    ],
)
def test_model_names_and_aliases(name: str, key: str) -> None:
    assert get_model(name).key == key


def test_unknown_model_is_a_clear_error() -> None:
    with pytest.raises(MigPlanError, match=r"unknown GPU model 'b200'; choose from a100-40gb, a100-80gb"):
        get_model("b200")


# -- the validator -------------------------------------------------------------------------------------------------

VALID = [
    ("a100-40gb", [("4g.20gb", 0), ("2g.10gb", 4), ("1g.5gb", 6)]),
    ("a100-40gb", [("3g.20gb", 0), ("3g.20gb", 4)]),
    ("a100-40gb", [("1g.5gb", s) for s in range(7)]),
    ("a100-40gb", [("2g.10gb", 0), ("2g.10gb", 2), ("2g.10gb", 4), ("1g.5gb", 6)]),
    ("a100-40gb", [("4g.20gb", 0), ("3g.20gb", 4)]),  # 4 + 3 compute slices, 4 + 4 memory slices
    ("a100-40gb", [("3g.20gb", 4), ("1g.5gb", 0), ("1g.5gb", 1), ("1g.5gb", 2), ("1g.5gb", 3)]),
    ("a100-40gb", [("1g.10gb", s) for s in (0, 2, 4, 6)]),
    ("a100-40gb", [("1g.5gb+me", 0), *[("1g.5gb", s) for s in range(1, 7)]]),
    ("a100-40gb", [("7g.40gb", 0)]),
    ("a100-80gb", [("1g.10gb", s) for s in range(7)]),
    ("h100-80gb", [("3g.40gb", 0), ("2g.20gb", 4), ("1g.10gb", 6)]),
    ("h200-141gb", [("4g.71gb", 0), ("1g.35gb", 4), ("1g.35gb", 6)]),
    ("h200-141gb", [("3g.71gb", 0), ("2g.35gb", 4), ("1g.18gb", 6)]),
]

INVALID = [
    ("a100-40gb", [("4g.20gb", 0), ("4g.20gb", 0)], "overlaps"),
    ("a100-40gb", [("4g.20gb", 0), ("4g.20gb", 4)], "may start only at slot 0"),
    ("a100-40gb", [("1g.5gb", s) for s in range(8)], "may start only at slot 0,1,2,3,4,5,6"),
    ("a100-40gb", [("3g.20gb", 0), ("3g.20gb", 4), ("1g.5gb", 6)], "overlaps"),
    ("a100-40gb", [("3g.20gb", 0), ("1g.5gb", 3)], "overlaps"),
    ("a100-40gb", [("2g.10gb", 6)], "may start only at slot 0,2,4"),
    ("a100-40gb", [("3g.20gb", 2)], "may start only at slot 0,4"),
    ("a100-40gb", [("1g.5gb+me", 0), ("1g.5gb+me", 1)], "at most 1 per GPU"),
    ("a100-40gb", [("7g.40gb", 0), ("1g.5gb", 0)], "overlaps"),
    ("a100-40gb", [("3g.40gb", 0)], "not an A100-SXM4-40GB profile"),
    (
        "a100-80gb",
        [("1g.20gb", 0), ("1g.20gb", 2), ("1g.20gb", 4), ("1g.20gb", 6), ("1g.10gb", 1)],
        "overlaps",
    ),
]


@pytest.mark.parametrize(("key", "layout"), VALID)
def test_known_valid_layouts(key: str, layout: list[tuple[str, int]]) -> None:
    assert check_layout(key, layout) == []


@pytest.mark.parametrize(("key", "layout", "problem"), INVALID)
def test_known_invalid_layouts(key: str, layout: list[tuple[str, int]], problem: str) -> None:
    problems = check_layout(key, layout)
    assert problems and any(problem in p for p in problems), problems


def test_eight_1g_instances_break_two_rules() -> None:
    problems = check_layout("a100-40gb", [("1g.5gb", s) for s in range(7)] + [("1g.5gb", 6)])
    assert any("overlaps" in p for p in problems) and any("8 x 1g.5gb: at most 7" in p for p in problems)


# -- the planner against brute force ------------------------------------------------------------------------------


@pytest.mark.parametrize("key", GPU_MODELS)
def test_every_multiset_up_to_7_instances_on_one_gpu(key: str) -> None:
    """All 3432 multisets of the 7 profiles with 1-7 instances: a layout iff brute force finds one."""
    model = get_model(key)
    for names in multisets(profile_names(key), 7):
        layout = pack_profiles(key, names, gpus=1)
        expected = brute_place(key, names)
        assert (layout is not None) == (expected is not None), names
        if layout is not None:
            assert len(layout) == 1 and check_layout(key, layout[0]) == [], (names, layout)
            assert sorted(n for n, _ in layout[0]) == sorted(names)
        # and on one GPU the counts decide (worth knowing: no count-feasible set is a placement dead end)
        memory = sum(prof(key, n).memory_slices for n in names)
        compute = sum(prof(key, n).compute_slices for n in names)
        within = all(names.count(p.name) <= p.max_instances for p in model.profiles)
        assert (layout is not None) == (memory <= 8 and compute <= 7 and within), names


@pytest.mark.parametrize("key", GPU_MODELS)
def test_several_gpus_against_brute_force(key: str) -> None:
    rng = random.Random(f"several-{key}")
    names = profile_names(key)
    for _ in range(60):
        picked = [rng.choice(names) for _ in range(rng.randint(2, 8))]
        limit = 3
        expected = brute_min_gpus(key, picked, limit)
        assert min_gpus(key, picked, limit=limit) == expected, picked
        for gpus in range(1, limit + 1):
            layout = pack_profiles(key, picked, gpus=gpus)
            assert (layout is not None) == (expected is not None and expected <= gpus), (picked, gpus)
            if layout is not None:
                assert len(layout) == expected
                assert sorted(n for gpu in layout for n, _ in gpu) == sorted(picked)
                assert all(check_layout(key, gpu) == [] for gpu in layout)


@pytest.mark.parametrize("key", GPU_MODELS)
def test_big_random_requests_stay_valid_and_fast(key: str) -> None:
    rng = random.Random(f"big-{key}")
    model = get_model(key)
    for _ in range(80):
        weights = [rng.random() ** 2 for _ in model.profiles]
        picked = rng.choices(profile_names(key), weights, k=rng.randint(8, MAX_INSTANCES))
        layout = pack_profiles(key, picked, gpus=8)
        if layout is None:
            continue
        assert sorted(n for gpu in layout for n, _ in gpu) == sorted(picked)
        assert all(check_layout(key, gpu) == [] for gpu in layout)
        assert len(layout) == min_gpus(key, picked)


def _choices(model_key: str, need_gb: float) -> list[str]:
    """Every profile an instance with this need (plus the default CUDA context reserve) could run in."""
    return [
        p.name for p in get_model(model_key).profiles if not p.media and p.memory_gb >= need_gb + CONTEXT_GB
    ]


@pytest.mark.parametrize("key", GPU_MODELS)
def test_smallest_profile_per_need_is_never_worse_than_any_other_choice(key: str) -> None:
    """Brute force over every profile choice per instance: if any choice fits, the plan is valid, and it uses
    no more memory slices than the best choice."""
    rng = random.Random(f"needs-{key}")
    model = get_model(key)
    top = model.profiles[-1].memory_gb
    for _ in range(25):
        needs = [round(rng.uniform(0.5, top * 0.6), 1) for _ in range(rng.randint(1, 3))]
        counts = [rng.randint(1, 2) for _ in needs]
        gpus = rng.randint(1, 2)
        spec = ", ".join(f"t{i} {gb}GB x{c}" for i, (gb, c) in enumerate(zip(needs, counts, strict=True)))
        plan = plan_mig(key, spec, gpus=gpus)
        per_tenant = [
            list(itertools.combinations_with_replacement(_choices(key, gb), c))
            for gb, c in zip(needs, counts, strict=True)
        ]
        best: int | None = None
        for parts in itertools.product(*per_tenant):
            choice = tuple(sorted(n for part in parts for n in part))
            if _brute_min_gpus(key, choice, gpus) is not None:
                slices = sum(prof(key, n).memory_slices for n in choice)
                best = slices if best is None else min(best, slices)
        assert plan.valid == (best is not None), spec
        if plan.valid:
            assert sum(i.profile.memory_slices for i in plan.instances()) == best, spec


def _check_plan(plan: MigPlan) -> None:
    for layout in plan.layouts:
        assert check_layout(plan.model, [(i.profile.name, i.start) for i in layout.instances]) == []
    for d in plan.demands:
        found = plan.instances(d.spec.name)
        assert len(found) == d.spec.count and {i.profile for i in found} == {d.profile}
        assert sorted(i.instance for i in found) == list(range(1, d.spec.count + 1))
    lookups = [i.lookup for i in plan.instances()]
    assert len(lookups) == len(set(lookups))  # no two tenant instances get the same MIG device
    for layout in plan.layouts:
        for inst in layout.instances:
            same = sorted(i.start for i in layout.instances if i.profile == inst.profile)
            assert inst.ordinal == same.index(inst.start) + 1


@pytest.mark.parametrize("key", GPU_MODELS)
def test_planned_tenant_sets_all_pass_the_validator(key: str) -> None:
    rng = random.Random(f"tenants-{key}")
    names = profile_names(key)
    valid = 0
    for _ in range(150):
        parts = []
        for i in range(rng.randint(1, 4)):
            if rng.random() < 0.5:
                parts.append(f"p{i} {rng.choice(names)} x{rng.randint(1, 4)}")
            else:
                parts.append(f"n{i} {rng.uniform(1, 60):.1f}GB x{rng.randint(1, 4)}")
        plan = plan_mig(key, ", ".join(parts), gpus=rng.randint(1, 4), host_cpus=64, host_memory_gb=512)
        json.dumps(plan.to_json())
        if plan.valid:
            valid += 1
            _check_plan(plan)
        else:
            assert plan.reasons and plan.alternatives
            for alternative in plan.alternatives:
                assert all(check_layout(key, list(gpu)) == [] for gpu in alternative.layout)
    assert valid > 30


# -- guide A §7: "1x3GB inference + 6x10GB training" ----------------------------------------------------------------

GUIDE = "inference 3GB x1, training 10GB x6"


def test_guide_case_is_invalid_on_a100_80gb_with_the_cuda_context_reserve() -> None:
    """Each instance's process pays ~0.5 GB of CUDA context out of the instance: 10 GB + 0.5 GB > 1g.10gb's
    9.50 GiB = 10.2 GB, so training needs 1g.20gb (2 memory slices, at most 4 per GPU): 1 + 6 x 2 = 13 > 8."""
    plan = plan_mig("a100-80gb", GUIDE)
    assert plan.context_gb == CONTEXT_GB == 0.5
    assert not plan.valid and plan.layouts == [] and plan.commands() == []
    assert assigned(plan) == ["1g.10gb", "1g.20gb"]
    training = plan.demands[1]
    assert training.context_gb == 0.5 and training.need_gb == 10.5
    assert training.why.startswith(
        "smallest profile with >= 10 GB + 0.5 GB CUDA context: 1g.20gb has 19.50 GiB = 20.9 GB, 14 SMs"
    )
    assert "(1g.10gb has only 9.50 GiB = 10.2 GB)" in training.why
    assert not training.tight  # 20.9 GB for 10.5 GB
    assert any("= 13 memory slices; 1 GPU has 8" in r for r in plan.reasons)
    assert any("6 x 1g.20gb: at most 4 per GPU" in r for r in plan.reasons)
    kinds = {a.kind: a for a in plan.alternatives}
    assert kinds["more-gpus"].gpus == 2 and "--gpus 2" in kinds["more-gpus"].summary
    drops = [a.summary for a in plan.alternatives if a.kind == "drop"]
    assert drops[0].startswith("leave out 3 of training's 6 instances: the rest fits on 1 GPU")
    smaller = kinds["smaller"].summary
    assert smaller.startswith("give training 1g.10gb instead of 1g.20gb: only if it can do with 9.50 GiB")
    assert "CUDA context included: 9.70 GB besides the 0.5 GB context (it asked for 10 GB)" in smaller
    assert "share" in kinds
    (note,) = [n for n in plan.notes if "--context-gb 0" in n]
    assert note.startswith(
        "with --context-gb 0 (no CUDA context reserve) this would be a valid layout on 1 GPU"
    )
    assert "training in 1g.10gb (9.50 GiB = 10.2 GB) with only 0.20 GB to spare per instance" in note
    assert "inference" not in note  # its profile is the same either way
    assert plan_mig("a100-80gb", GUIDE, gpus=2).valid
    data = plan.to_json()
    assert data["context_gb"] == 0.5 and data["tenants"][1]["context_gb"] == 0.5


def test_guide_case_is_valid_on_a100_80gb_without_the_context_reserve() -> None:
    """1g.10gb on A100 80GB: 1 of 8 memory slices, up to 7 instances, 9.50 GiB = 10.2 GB. With context_gb=0,
    seven of them hold the 3 GB inference and the six 10 GB training jobs; slice 7 stays unused (no 1g
    profile starts there)."""
    plan = plan_mig("a100-80gb", GUIDE, host_cpus=128, host_memory_gb=1024, context_gb=0)
    assert plan.valid
    _check_plan(plan)
    (layout,) = plan.layouts
    assert sorted((i.profile.name, i.start) for i in layout.instances) == [("1g.10gb", s) for s in range(7)]
    assert layout.slot_map() == "ABCDEFGx" and layout.stranded == (7,)
    assert plan.summary()["compute_slices_used"] == 7 and plan.summary()["memory_slices_used"] == 7
    assert plan.demands[1].why.startswith("smallest profile with >= 10 GB: 1g.10gb")
    assert any(
        "training: tight fit" in n and "0.20 GB to spare" in n and "--context-gb 0: no reserve" in n
        for n in plan.notes
    )
    assert any("memory slice 7 stays unused" in n for n in plan.notes)
    assert not any("with --context-gb 0" in n for n in plan.notes)
    assert "sudo nvidia-smi mig -i 0 -cgi 19:0,19:1,19:2,19:3,19:4,19:5,19:6 -C" in plan.commands()


def test_guide_case_is_invalid_on_a100_40gb() -> None:
    """On A100 40GB a 10 GB need alone takes 1g.10gb: 2 memory slices, at most 4 per GPU; 1 + 6 x 2 = 13 > 8."""
    plan = plan_mig("a100-40gb", GUIDE, context_gb=0)
    assert not plan.valid and plan.layouts == [] and plan.commands() == []
    assert assigned(plan) == ["1g.5gb", "1g.10gb"]
    assert any("= 13 memory slices; 1 GPU has 8" in r for r in plan.reasons)
    assert any("6 x 1g.10gb: at most 4 per GPU" in r for r in plan.reasons)
    kinds = {a.kind: a for a in plan.alternatives}
    assert kinds["more-gpus"].gpus == 2 and "--gpus 2" in kinds["more-gpus"].summary
    drops = [a.summary for a in plan.alternatives if a.kind == "drop"]
    assert drops[0].startswith("leave out 3 of training's 6 instances: the rest fits on 1 GPU")
    assert "smaller" in kinds and "share" in kinds


def test_guide_case_on_a100_40gb_with_the_context_reserve_needs_3g() -> None:
    """10 GB + 0.5 GB is more than 1g.10gb's and 2g.10gb's 9.75 GiB = 10.47 GB: 3g.20gb, at most 2 per GPU."""
    plan = plan_mig("a100-40gb", GUIDE)
    assert not plan.valid
    assert assigned(plan) == ["1g.5gb", "3g.20gb"]
    assert "(2g.10gb has only 9.75 GiB = 10.5 GB)" in plan.demands[1].why
    assert any("= 25 memory slices; 1 GPU has 8" in r for r in plan.reasons)
    assert any("6 x 3g.20gb: at most 2 per GPU" in r for r in plan.reasons)
    assert {a.kind: a for a in plan.alternatives}["more-gpus"].gpus == 4
    assert not any("with --context-gb 0" in n for n in plan.notes)  # invalid without the reserve too


def test_guide_case_in_gib_is_invalid_on_a100_80gb() -> None:
    """10 GiB is 10.74 GB: more than 1g.10gb's 10.2 GB even without the context reserve, so 1g.20gb (2 slices
    each) and no single-GPU layout either way."""
    for context in (0.0, CONTEXT_GB):
        plan = plan_mig("a100-80gb", "inference 3GB x1, training 10GiB x6", context_gb=context)
        assert not plan.valid
        assert assigned(plan) == ["1g.10gb", "1g.20gb"]
        assert any("= 13 memory slices" in r for r in plan.reasons)
        assert not any("with --context-gb 0" in n for n in plan.notes)
    assert plan.demands[1].why.startswith(
        "smallest profile with >= 10 GiB = 10.74 GB + 0.5 GB CUDA context: 1g.20gb"
    )
    assert plan_mig("a100-80gb", "inference 3GB x1, training 10GiB x6", gpus=2).valid


# -- the CUDA context reserve -------------------------------------------------------------------------------------


def test_context_reserve_applies_to_memory_needs_only() -> None:
    # profile tenants get what they named, whatever the reserve
    for context in (0.0, 0.5, 5.0):
        plan = plan_mig("a100-80gb", "3g + 2x1g, big 1g.20gb", context_gb=context)
        assert assigned(plan) == ["3g.40gb", "1g.10gb", "1g.20gb"]
        assert all(d.context_gb == 0 and d.headroom_gb is None for d in plan.demands)
    # a need without memory (SMs, compute) gets no reserve either
    (sms,) = plan_mig("h200", "t 20SM", context_gb=2).demands
    assert sms.profile is not None and sms.profile.name == "1g.35gb" and sms.context_gb == 0
    assert "CUDA context" not in sms.why
    # with compute or media, the reserve sits next to the memory it is added to
    (llm,) = plan_mig("h200", "llm 60GB 3g").demands
    assert llm.why.startswith("smallest profile with >= 60 GB + 0.5 GB CUDA context, 3g: 3g.71gb")
    # a memory need does, and a larger reserve can move it up the chain
    (spec,) = parse_tenants("t 9GB")
    assert resolve_tenant("a100-80gb", spec, context_gb=0).profile == prof("a100-80gb", "1g.10gb")
    assert resolve_tenant("a100-80gb", spec).profile == prof("a100-80gb", "1g.10gb")  # 9.5 <= 10.2
    bigger = resolve_tenant("a100-80gb", spec, context_gb=1.5)
    assert bigger.profile == prof("a100-80gb", "1g.20gb") and bigger.need_gb == 10.5
    assert bigger.headroom_gb == pytest.approx(prof("a100-80gb", "1g.20gb").memory_gb - 10.5)


def test_tight_fit_is_judged_with_the_reserve() -> None:
    # 9.5 GB + 0.5 GB in 1g.10gb's 10.2 GB: 0.2 GB to spare beyond the reserve
    plan = plan_mig("a100-80gb", "t 9.5GB")
    assert assigned(plan) == ["1g.10gb"] and plan.demands[0].tight
    (note,) = [n for n in plan.notes if "tight fit" in n]
    assert note.startswith(
        "t: tight fit, a 9.5 GB + 0.5 GB CUDA context need in 1g.10gb's 9.50 GiB = 10.2 GB"
    )
    assert "0.20 GB to spare for allocator fragmentation and a CUDA context larger than the 0.5 GB" in note
    # 9 GB + 0.5 GB leaves 0.7 GB: not tight
    assert not plan_mig("a100-80gb", "t 9GB").demands[0].tight
    # without the reserve the same 9.5 GB need leaves 0.7 GB: not tight either
    assert not plan_mig("a100-80gb", "t 9.5GB", context_gb=0).demands[0].tight


def test_json_summary_counts_memory_beyond_need_and_reserve() -> None:
    plan = plan_mig("a100-80gb", "t 9GB x2")
    expected = 2 * (prof("a100-80gb", "1g.10gb").memory_gb - 9.5)
    assert plan.summary()["over_allocated_gb"] == round(expected, 1)


@pytest.mark.parametrize("context", [-0.1, -1.0, float("nan"), float("inf")])
def test_bad_context_reserve_is_refused(context: float) -> None:
    with pytest.raises(MigPlanError, match=r"--context-gb .*: the CUDA context reserve per instance is 0"):
        plan_mig("a100-80gb", GUIDE, context_gb=context)
    (spec,) = parse_tenants("t 3GB")
    with pytest.raises(MigPlanError, match="CUDA context reserve"):
        resolve_tenant("a100-80gb", spec, context_gb=context)


# -- the planner on its own ----------------------------------------------------------------------------------------


def test_3g_goes_to_slot_4_when_four_1g_need_the_low_half() -> None:
    plan = plan_mig("a100-40gb", "3g + 4x1g")
    assert plan.valid
    starts = {(i.profile.name, i.start) for i in plan.instances()}
    assert ("3g.20gb", 4) in starts and {s for n, s in starts if n == "1g.5gb"} == {0, 1, 2, 3}
    commands = plan.commands()
    assert "sudo nvidia-smi mig -i 0 -cgi 9:4,19:0,19:1,19:2,19:3 -C" in commands


def test_creation_order_is_most_constrained_first() -> None:
    plan = plan_mig("h200", "1g.18gb + 2g.35gb + 4g.71gb")
    assert "sudo nvidia-smi mig -i 0 -cgi 5:0,14:4,19:6 -C" in plan.commands()


def test_single_profile_leaves_room_for_the_biggest_neighbour() -> None:
    # a lone 3g at slot 4 leaves slots 0-3, where a 4g (4 compute slices) fits; at slot 0 only a 3g would
    plan = plan_mig("a100-80gb", "3g")
    assert [(i.profile.name, i.start) for i in plan.instances()] == [("3g.40gb", 4)]


def test_4g_plus_4g_needs_two_gpus() -> None:
    plan = plan_mig("a100-40gb", "4g + 4g")
    assert not plan.valid
    assert any("2 x 4g.20gb: at most 1 per GPU ({0}:4" in r for r in plan.reasons)
    assert any("= 8 compute slices; 1 GPU has 7" in r for r in plan.reasons)
    smaller = [a for a in plan.alternatives if a.kind == "smaller"]
    assert len(smaller) == 1 and smaller[0].layout == ((("4g.20gb", 0), ("3g.20gb", 4)),)
    two = plan_mig("a100-40gb", "4g + 4g", gpus=2)
    assert two.valid and [len(layout.instances) for layout in two.layouts] == [1, 1]


def test_eight_1g_do_not_fit_one_gpu() -> None:
    plan = plan_mig("h100-80gb", "8x1g")
    assert not plan.valid
    assert any("instances: 8; a GPU holds at most 7" in r for r in plan.reasons)
    assert any("8 x 1g.10gb: at most 7 per GPU" in r for r in plan.reasons)


def test_several_gpus_fill_the_first_and_keep_the_rest_whole() -> None:
    plan = plan_mig("h100-80gb", "a 7g x2, b 1g x3", gpus=4, host_cpus=224, host_memory_gb=2000)
    assert plan.valid
    _check_plan(plan)
    used = [layout for layout in plan.layouts if layout.instances]
    assert len(used) == 3 and plan.summary()["gpus_free"] == 1
    assert any("GPU3: no instance needed" in n for n in plan.notes)
    assert "sudo nvidia-smi -i 0,1,2 -mig 1" in plan.commands()


def test_a_need_bigger_than_the_gpu_is_explained() -> None:
    plan = plan_mig("a100-80gb", "big 100GB, small 3g")
    assert not plan.valid
    assert plan.reasons[0].startswith("big: no A100-SXM4-80GB instance is big enough: the largest, 7g.80gb")
    assert len(plan.reasons) == 1  # the rest fits: no placement reason for it
    assert plan.alternatives[0].summary == "the other tenants fit on 1 GPU without big"


def test_needs_with_compute_and_sms() -> None:
    assert assigned(plan_mig("a100-40gb", "t 5GB 2g")) == ["2g.10gb"]
    assert assigned(plan_mig("h200", "t 40SM")) == ["3g.71gb"]
    assert assigned(plan_mig("h200", "t 20SM")) == ["1g.35gb"]
    # the H200's 1g.35gb has 32.25 GiB = 34.6 GB: a 35 GB need does not fit in it
    assert assigned(plan_mig("h200", "t 35GB")) == ["3g.71gb"]


def test_media_needs_get_the_me_profile_and_only_one_per_gpu() -> None:
    plan = plan_mig("h200", "video 3GB +me x2")
    assert not plan.valid and any("2 x 1g.18gb+me: at most 1 per GPU" in r for r in plan.reasons)
    merge = [a for a in plan.alternatives if a.kind == "merge"]
    assert merge and "one 1g.18gb+me" in merge[0].summary
    assert plan_mig("h200", "video 3GB +me x2", gpus=2).valid


def test_slices_split_the_host_by_compute_slices() -> None:
    plan = plan_mig("a100-80gb", "web 3g, batch 2g x2", host_cpus=70, host_memory_gb=700)
    units = plan.slice_units()
    assert set(units) == {"web", "batch"}
    assert "CPUQuota=3000%" in units["web"]["text"]  # 3 of 7 slices of 70 CPUs = 30 CPUs
    assert "CPUQuota=4000%" in units["batch"]["text"]
    assert f"MemoryMax={int(300e9 / 2**20)}M" in units["web"]["text"]
    assert units["batch"]["unit"] == "mig_batch.slice" and len(units["batch"]["run"]) == 2
    assert all("--slice=mig_batch.slice" in line for line in units["batch"]["run"])
    assert plan_mig("a100-80gb", "web 3g").slice_units() == {}  # no host given: no slices


def test_unit_names_are_safe() -> None:
    plan = plan_mig("a100-80gb", "team-a.web 1g", host_cpus=8, host_memory_gb=64)
    assert plan.slice_units()["team-a.web"]["unit"] == "mig_team_a_web.slice"


def test_cuda_lines_give_every_instance_its_own_device() -> None:
    plan = plan_mig("a100-40gb", "a 1g x2, b 1g, c 2g")
    lines = [line for line in plan.cuda_lines() if line.startswith("CUDA_VISIBLE_DEVICES=")]
    assert lines == [
        "CUDA_VISIBLE_DEVICES=$(mig_uuid 0 1g.5gb 1)",
        "CUDA_VISIBLE_DEVICES=$(mig_uuid 0 1g.5gb 2)",
        "CUDA_VISIBLE_DEVICES=$(mig_uuid 0 1g.5gb 3)",
        "CUDA_VISIBLE_DEVICES=$(mig_uuid 0 2g.10gb 1)",
    ]
    assert any("MIG-<uuid of GPU0 2g.10gb #1>" in line for line in plan.cuda_lines())


def test_json_has_the_full_layout() -> None:
    plan = plan_mig("a100-80gb", "inference 3GB x1, training 10GB x6", context_gb=0)
    data = json.loads(json.dumps(plan.to_json()))
    assert data["schema"] == "dgxperf.plan.mig/1" and data["valid"] is True and data["context_gb"] == 0
    assert data["layout"][0]["map"] == "ABCDEFGx"
    assert data["tenants"][1]["assigned_profile"] == "1g.10gb" and len(data["tenants"][1]["instances"]) == 6
    assert data["summary"]["stranded_slices"] == 1 and data["commands"]


# -- the parser -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3g + 2x1g", [("tenant1", 1, None, 3, None), ("tenant2", 2, None, 1, None)]),
        ("3g.71gb + 2x1g.18gb", [("tenant1", 1, "3g.71gb", 3, None), ("tenant2", 2, "1g.18gb", 1, None)]),
        (
            "inference 3GB x1, training 10GB x6",
            [("inference", 1, None, None, 3.0), ("training", 6, None, None, 10.0)],
        ),
        ("web: 2g 20 GB x 3", [("web", 3, None, 2, 20.0)]),
        ("web=1g ×2; db 4g", [("web", 2, None, 1, None), ("db", 1, None, 4, None)]),
        ("1g.5gb+me", [("tenant1", 1, "1g.5gb+me", 1, None)]),
        ("1g.5gb +me x1", [("tenant1", 1, "1g.5gb+me", 1, None)]),
        ("6 x 1g", [("tenant1", 6, None, 1, None)]),
        ("1g*6", [("tenant1", 6, None, 1, None)]),
        ("MIG 3g.20gb", [("tenant1", 1, "3g.20gb", 3, None)]),
    ],
)
def test_parse(text: str, expected: list[tuple[str, int, str | None, int | None, float | None]]) -> None:
    got = [(s.name, s.count, s.profile, s.compute, s.memory_gb) for s in parse_tenants(text)]
    assert got == expected


def test_parse_units_and_sms() -> None:
    (gib,) = parse_tenants("a 9.5GiB")
    assert gib.memory_gb == pytest.approx(9.5 * 2**30 / 1e9) and gib.memory_text == "9.5 GiB = 10.2 GB"
    (sms,) = parse_tenants("render 40 SMs")
    assert sms.sms == 40 and sms.memory_gb is None and sms.is_need
    (media,) = parse_tenants("video 3GB +me")
    assert media.media and media.memory_gb == 3.0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no tenants given"),
        (
            "web 10GX x2",
            "in 'web 10GX x2': '10GX' is not a count (x6), a profile (3g, 1g.10gb), a memory need",
        ),
        ("3", "'3' needs a unit: 3GB for memory, x3 for a count"),
        ("t 10g", "10g: MIG profiles have 1, 2, 3, 4 or 7 compute slices; for memory write 10GB"),
        ("a 3GB, a 5GB", "tenant name 'a' is used twice"),
        ("3g 1g", "two profiles"),
        ("x2 3g x3", "two counts"),
        ("1g.10gb 5GB", "give either a profile (1g.10gb) or a need"),
        ("x0 3g", "a count is at least 1"),
        ("web", "no profile (3g, 1g.10gb) and no need"),
        ("3GB web", "(a name goes first: web 10GB x2)"),
        ("57x1g", "57 instances asked for; 8 GPUs hold at most 56"),
        ("t 0GB", "a memory need is more than 0"),
    ],
)
def test_parse_errors_say_which_part_is_wrong(text: str, message: str) -> None:
    with pytest.raises(MigPlanError) as caught:
        parse_tenants(text)
    assert message in str(caught.value)


def test_profiles_of_another_gpu_are_refused_with_the_right_ones() -> None:
    (spec,) = parse_tenants("3g.20gb")
    with pytest.raises(
        MigPlanError, match=r"3g.20gb is not an H200-SXM5-141GB profile; its 3g profiles are 3g.71gb"
    ):
        resolve_tenant("h200", spec)


def test_gpus_out_of_range() -> None:
    with pytest.raises(MigPlanError, match="plan 1 to 8 GPUs"):
        plan_mig("h200", "3g", gpus=9)
