from __future__ import annotations

import pytest

from dgxperf.doctor import stack
from dgxperf.results import NA, Finding, Status

from .snapshots import make, torch_info


def one(findings: object) -> Finding:
    items = list(findings)  # type: ignore[call-overload]
    assert len(items) == 1
    return items[0]


@pytest.mark.parametrize(
    ("runtime", "driver", "driver_cuda", "status"),
    [
        ("13.0", "580.159.04", 13000, Status.PASS),  # the lent H200
        ("12.8", "580.159.04", 13000, Status.PASS),  # older runtime on a newer driver: backward compatible
        ("11.8", "525.85.12", 12000, Status.PASS),  # the guide's stack (A §3.1)
        ("12.8", "535.54.03", 12020, Status.WARN),  # minor version compatibility within 12.x
        ("13.0", "570.86.10", 12080, Status.FAIL),  # CUDA 13 runtime needs an R580 driver
        ("12.1", "520.61.05", 11080, Status.FAIL),
    ],
)
def test_driver_cuda_compat(runtime: str, driver: str, driver_cuda: int, status: Status) -> None:
    snap = make(
        nvml={"driver_version": driver, "cuda_driver_version": driver_cuda}, torch=torch_info(cuda=runtime)
    )
    finding = one(stack.check_driver_cuda(snap))
    assert finding.status is status
    assert finding.evidence["torch_cuda_runtime"] == runtime
    if status is Status.FAIL:
        assert finding.fix is not None and ">=" in finding.fix.summary


def test_driver_cuda_unknown_without_nvml_and_na_for_cpu_build() -> None:
    snap = make(nvml={"reachable": False, "error": "NVML_ERROR_LIBRARY_NOT_FOUND: x"})
    assert one(stack.check_driver_cuda(snap)).status is Status.UNKNOWN
    cpu = make(torch=torch_info(cuda=NA("CPU-only build of PyTorch"), built_with_cuda=False))
    assert one(stack.check_driver_cuda(cpu)).status is Status.NOT_APPLICABLE


def test_torch_missing_cpu_build_with_gpu_and_invisible_gpus() -> None:
    assert (
        one(stack.check_torch(make(torch={"installed": False, "error": "No module"}))).status is Status.FAIL
    )
    cpu_build = make(torch=torch_info(built_with_cuda=False, cuda=NA("cpu")))
    finding = one(stack.check_torch(cpu_build))
    assert finding.status is Status.FAIL and finding.fix is not None
    hidden = make(torch=torch_info(cuda_available=False), env={"CUDA_VISIBLE_DEVICES": ""})
    finding = one(stack.check_torch(hidden))
    assert finding.status is Status.FAIL
    assert "CUDA_VISIBLE_DEVICES is empty" in finding.evidence["problem"]
    assert one(stack.check_torch(make())).status is Status.PASS
    no_gpu = make(gpus=[], torch=torch_info(built_with_cuda=False, cuda=NA("cpu")))
    assert one(stack.check_torch(no_gpu)).status is Status.NOT_APPLICABLE


def test_libraries_fail_without_nccl() -> None:
    assert one(stack.check_libraries(make())).status is Status.PASS
    finding = one(stack.check_libraries(make(torch=torch_info(nccl_backend=False))))
    assert finding.status is Status.FAIL and "NCCL" in finding.fix.summary  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("arch_list", "cc", "coverage"),
    [
        (["sm_80", "sm_90"], (9, 0), "native"),
        (["sm_80", "sm_86"], (8, 9), "native"),  # an sm_86 cubin runs on 8.9
        (["sm_80", "compute_80"], (9, 0), "ptx"),  # only PTX JIT for Hopper
        (["sm_90a"], (9, 0), "native"),
        (["sm_90a"], (10, 0), "none"),
        (["sm_75", "sm_80"], (9, 0), "none"),
        (["sm_100"], (9, 0), "none"),
    ],
)
def test_arch_coverage(arch_list: list[str], cc: tuple[int, int], coverage: str) -> None:
    assert stack.arch_coverage(arch_list, cc) == coverage


def test_arch_check_statuses() -> None:
    assert one(stack.check_arch(make())).status is Status.PASS
    old = make(torch=torch_info(arch_list=["sm_70", "sm_80"]))
    finding = one(stack.check_arch(old))
    assert finding.status is Status.FAIL and "TORCH_CUDA_ARCH_LIST=9.0" in finding.fix.summary  # type: ignore[union-attr]
    ptx = make(torch=torch_info(arch_list=["sm_80", "compute_80"]))
    assert one(stack.check_arch(ptx)).status is Status.WARN
    assert one(stack.check_arch(make(gpus=[]))).status is Status.NOT_APPLICABLE


def test_nccl_env_flags_dangerous_settings() -> None:
    assert one(stack.check_nccl_env(make())).status is Status.PASS
    finding = one(stack.check_nccl_env(make(env={"NCCL_P2P_DISABLE": "1", "NCCL_DEBUG": "INFO"})))
    assert finding.status is Status.FAIL
    assert finding.fix is not None and "unset NCCL_DEBUG" in finding.fix.commands
    assert "unset NCCL_P2P_DISABLE" in finding.fix.commands
    forced = one(stack.check_nccl_env(make(env={"NCCL_ALGO": "Tree", "NCCL_PROTO": "Simple"})))
    assert forced.status is Status.WARN
    assert "guide A §5.1: Tree" in forced.evidence["guide_values"]["NCCL_ALGO"]


def test_nccl_ib_disable_matters_only_with_infiniband() -> None:
    env = {"NCCL_IB_DISABLE": "1"}
    assert one(stack.check_nccl_env(make(env=env))).status is Status.PASS
    with_ib = make(env=env, host={"infiniband": [{"name": "mlx5_0", "ports": []}]})
    assert one(stack.check_nccl_env(with_ib)).status is Status.FAIL


def test_nvls_disable_only_matters_with_several_gpus() -> None:
    env = {"NCCL_NVLS_ENABLE": "0"}
    assert one(stack.check_nccl_env(make(env=env))).status is Status.PASS
    two = make(env=env, gpus=[{"index": 0}, {"index": 1}])
    assert one(stack.check_nccl_env(two)).status is Status.WARN


def test_cuda_env() -> None:
    assert one(stack.check_cuda_env(make())).status is Status.PASS
    finding = one(stack.check_cuda_env(make(env={"CUDA_LAUNCH_BLOCKING": "1"})))
    assert finding.status is Status.FAIL and finding.fix is not None
    assert finding.fix.commands == ("unset CUDA_LAUNCH_BLOCKING",)
    hidden = one(
        stack.check_cuda_env(make(env={"CUDA_VISIBLE_DEVICES": "0"}, gpus=[{"index": 0}, {"index": 1}]))
    )
    assert hidden.status is Status.PASS and "1 of 2" in hidden.evidence["note"]


def test_version_tuple() -> None:
    assert stack.version_tuple("580.159.04") == (580, 159, 4)
    assert stack.version_tuple("13.0") == (13, 0)
    assert stack.version_tuple("2.11.0+cu130") == (2, 11, 0)
