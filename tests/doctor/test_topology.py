"""Topology checks. The one-GPU H200 recording has no pairs; multi-GPU cases are built from its GPU record
with NVLink entries shaped as NVML reports them on HGX boards (18 links to NVSwitches per H100/H200)."""

from __future__ import annotations

import copy
from typing import Any

from dgxperf.doctor import topology
from dgxperf.hw.snapshot import Snapshot
from dgxperf.results import NA, Status

from .snapshots import h200


def node(count: int, *, links: str = "nvswitch", down: dict[int, int] | None = None) -> Snapshot:
    snap = h200()
    base = snap.gpus[0]
    gpus = []
    for i in range(count):
        gpu = copy.deepcopy(base)
        gpu["index"] = i
        gpu["pci_bus_id"] = f"00000000:{0x18 + i:02X}:00.0"
        if links == "nvswitch":
            gpu["nvlinks"] = [
                {"link": k, "active": k >= (down or {}).get(i, 0), "remote": "nvswitch", "remote_bus_id": "x"}
                for k in range(18)
            ]
        elif links == "bridge":  # PCIe cards with NVLink bridges between pairs 0-1, 2-3
            peer = i ^ 1
            gpu["nvlinks"] = [
                {
                    "link": k,
                    "active": True,
                    "remote": "gpu",
                    "remote_bus_id": f"00000000:{0x18 + peer:02X}:00.0",
                }
                for k in range(4)
            ]
        else:
            gpu["nvlinks"] = NA("NVML_ERROR_NOT_SUPPORTED: Not Supported")
        gpus.append(gpu)
    snap.nvml["gpus"] = gpus
    snap.nvml["pairs"] = [
        {"a": a, "b": b, "pcie_path": "NODE" if a // 4 == b // 4 else "SYS", "p2p_read": True}
        for a in range(count)
        for b in range(a + 1, count)
    ]
    return snap


def findings(check: Any, snap: Snapshot) -> dict[str, Any]:
    return {f.id: f for f in check(snap)}


def test_single_h200_has_no_pairs_and_no_nvlink() -> None:
    snap = h200()
    assert findings(topology.check_matrix, snap)["topology.gpu_pairs"].status is Status.NOT_APPLICABLE
    assert findings(topology.check_nvlinks, snap)["topology.nvlink.gpu0"].status is Status.NOT_APPLICABLE
    assert findings(topology.check_fabric, snap)["topology.fabric_manager"].status is Status.NOT_APPLICABLE
    assert findings(topology.check_numa, snap)["topology.numa_affinity"].status is Status.PASS
    assert findings(topology.check_infiniband, snap)["topology.infiniband"].status is Status.NOT_APPLICABLE


def test_nvswitch_node_matrix_reads_like_nvidia_smi_topo() -> None:
    snap = node(8)
    matrix = topology.pair_matrix(snap)
    assert matrix[0] == ["X"] + ["NV18"] * 7
    assert all(row[i] == "X" for i, row in enumerate(matrix))
    assert findings(topology.check_matrix, snap)["topology.gpu_pairs"].status is Status.PASS


def test_sxm_gpus_talking_over_pcie_fail() -> None:
    snap = node(4, links="none")
    finding = findings(topology.check_matrix, snap)["topology.gpu_pairs"]
    assert finding.status is Status.FAIL
    assert finding.evidence["matrix"][0] == "X NODE NODE NODE"
    assert "0-1" in finding.evidence["pairs_without_nvlink"]


def test_pcie_cards_with_bridges() -> None:
    snap = node(4, links="bridge")
    for gpu in snap.gpus:
        gpu["name"] = "NVIDIA H100 PCIe"
    matrix = topology.pair_matrix(snap)
    assert matrix[0] == ["X", "NV4", "NODE", "NODE"]
    assert findings(topology.check_matrix, snap)["topology.gpu_pairs"].status is Status.PASS


def test_an_inactive_nvlink_on_an_sxm_gpu_fails() -> None:
    snap = node(8, down={3: 2})
    result = findings(topology.check_nvlinks, snap)
    assert result["topology.nvlink.gpu3"].status is Status.FAIL
    assert result["topology.nvlink.gpu3"].evidence["inactive_links"] == [0, 1]
    assert result["topology.nvlink.gpu0"].status is Status.PASS


def test_fabric_manager_required_on_nvswitch_nodes() -> None:
    snap = node(8)
    snap.host["services"] = {"nvidia-fabricmanager": {"running": False, "enabled": False}}
    finding = findings(topology.check_fabric, snap)["topology.fabric_manager"]
    assert finding.status is Status.FAIL
    assert finding.fix is not None and "systemctl enable --now nvidia-fabricmanager" in finding.fix.commands
    snap.host["services"] = {"nvidia-fabricmanager": {"running": True, "enabled": True}}
    for gpu in snap.gpus:
        gpu["fabric"] = {"state": "completed", "status": 0, "clique_id": 1}
    assert findings(topology.check_fabric, snap)["topology.fabric_manager"].status is Status.PASS
    snap.gpus[5]["fabric"] = {"state": "in_progress", "status": 0, "clique_id": 1}
    failing = findings(topology.check_fabric, snap)["topology.fabric_manager"]
    assert failing.status is Status.FAIL and failing.evidence["not_ready"] == [5]


def test_numa_affinity_on_two_sockets() -> None:
    snap = node(8)
    snap.host["numa_nodes"] = [{"id": 0, "cpulist": "0-55"}, {"id": 1, "cpulist": "56-111"}]
    for gpu in snap.gpus:
        gpu["numa_node"] = gpu["index"] // 4
        gpu["local_cpulist"] = "0-55" if gpu["index"] < 4 else "56-111"
    finding = findings(topology.check_numa, snap)["topology.numa_affinity"]
    assert finding.status is Status.PASS and "numactl --cpunodebind=0" in finding.evidence["launch_hint"]
    snap.gpus[2]["numa_node"] = NA("numa_node = -1")
    assert findings(topology.check_numa, snap)["topology.numa_affinity"].status is Status.WARN


def test_infiniband_ports() -> None:
    snap = h200()
    snap.host["infiniband"] = [
        {"name": "mlx5_0", "ports": [{"port": 1, "state": "4: ACTIVE", "rate": "400 Gb/sec (4X NDR)"}]},
        {"name": "mlx5_1", "ports": [{"port": 1, "state": "1: DOWN", "rate": "10 Gb/sec"}]},
    ]
    finding = findings(topology.check_infiniband, snap)["topology.infiniband"]
    assert finding.status is Status.WARN and finding.evidence["not_active"] == ["mlx5_1/1"]
