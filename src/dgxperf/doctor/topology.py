"""Topology: the GPU-pair matrix (like ``nvidia-smi topo -m``), NVLink health, NVSwitch fabric manager,
GPU-to-NUMA affinity and InfiniBand ports (guide A §2.1, §3.1: "verify NVLink with nvidia-smi topo -m")."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dgxperf.doctor.base import read, unavailable, unknown
from dgxperf.hw.host import normalise_bdf
from dgxperf.hw.snapshot import Snapshot
from dgxperf.hw.specs import match_spec
from dgxperf.results import NA, Finding, Fix, Status

AREA = "topology"


def _form_factor(gpu: dict[str, Any]) -> str | None:
    name, memory = read(gpu, "name"), read(gpu, "memory_total_bytes")
    if isinstance(name, NA):
        return None
    spec = match_spec(name, memory if isinstance(memory, int) else None)
    return spec.form_factor if spec else None


def _links(gpu: dict[str, Any]) -> list[dict[str, Any]]:
    links = read(gpu, "nvlinks")
    return links if isinstance(links, list) else []


def pair_matrix(snap: Snapshot) -> list[list[str]]:
    """nvidia-smi topo -m's GPU block: "X" on the diagonal, "NV<n>" for NVLink, else the PCIe path.

    Through NVSwitch every GPU reaches every other over all its switch links, as nvidia-smi shows it.
    """
    gpus = snap.gpus
    index_of_bus = {
        normalise_bdf(g["pci_bus_id"]): g["index"] for g in gpus if not isinstance(g.get("pci_bus_id"), NA)
    }
    direct: dict[tuple[int, int], int] = {}
    to_switch: dict[int, int] = {}
    for gpu in gpus:
        for link in _links(gpu):
            if not link.get("active"):
                continue
            if link.get("remote") == "nvswitch":
                to_switch[gpu["index"]] = to_switch.get(gpu["index"], 0) + 1
                continue
            bus = link.get("remote_bus_id")
            peer = index_of_bus.get(normalise_bdf(bus)) if isinstance(bus, str) else None
            if peer is not None:
                key = (gpu["index"], peer)
                direct[key] = direct.get(key, 0) + 1
    paths = {(p["a"], p["b"]): p.get("pcie_path") for p in snap.nvml.get("pairs", [])}
    matrix = []
    for a in gpus:
        row = []
        for b in gpus:
            i, j = a["index"], b["index"]
            if i == j:
                row.append("X")
                continue
            nv = direct.get((i, j), 0) or direct.get((j, i), 0)
            if not nv and i in to_switch and j in to_switch:
                nv = min(to_switch[i], to_switch[j])
            if nv:
                row.append(f"NV{nv}")
            else:
                path = paths.get((min(i, j), max(i, j)))
                row.append(path if isinstance(path, str) else "?")
        matrix.append(row)
    return matrix


def check_matrix(snap: Snapshot) -> Iterable[Finding]:
    fid, title = "topology.gpu_pairs", "GPU-pair interconnect matrix"
    why = (
        "Data-parallel all-reduce runs at the speed of the slowest pair: on SXM nodes every pair should be "
        "NVLink/NVSwitch (600-900 GB/s), not PCIe (64 GB/s) (guide A §2.1, §3.1)."
    )
    gpus = snap.gpus
    if len(gpus) < 2:
        yield Finding(
            fid, AREA, title, Status.NOT_APPLICABLE, {"gpus": len(gpus)}, why + " One GPU: no pairs."
        )
        return
    matrix = pair_matrix(snap)
    evidence = {"gpus": [g["index"] for g in gpus], "matrix": [" ".join(r) for r in matrix]}
    sxm = [g["index"] for g in gpus if _form_factor(g) in ("sxm", "nvl")]
    pcie_pairs = [
        f"{a}-{b}"
        for a, row in enumerate(matrix)
        for b, cell in enumerate(row)
        if a < b and not cell.startswith("NV") and a in sxm and b in sxm
    ]
    if pcie_pairs:
        evidence["pairs_without_nvlink"] = pcie_pairs
        fix = Fix(
            "NVLink-capable GPUs talk over PCIe: check `nvidia-smi nvlink -s`, the fabric manager and NVLink bridges",
            manual=True,
        )
        yield Finding(fid, AREA, title, Status.FAIL, evidence, why, fix, guide="A §3.1")
        return
    yield Finding(fid, AREA, title, Status.PASS, evidence, why, guide="A §3.1")


def check_nvlinks(snap: Snapshot) -> Iterable[Finding]:
    why = "An inactive NVLink on an SXM GPU lowers its share of all-reduce bandwidth and points to a fault."
    for gpu in snap.gpus:
        i = gpu["index"]
        fid, title = f"topology.nvlink.gpu{i}", f"GPU {i}: NVLink links"
        links = read(gpu, "nvlinks")
        if isinstance(links, NA):
            yield unavailable(fid, AREA, title, links.reason, why, "nvlink")
            continue
        links = links or []
        active = [entry["link"] for entry in links if entry.get("active")]
        inactive = [entry["link"] for entry in links if not entry.get("active")]
        evidence = {"active": len(active), "inactive_links": inactive, "total": len(links)}
        if not active:
            yield Finding(
                fid, AREA, title, Status.NOT_APPLICABLE, evidence, why + " No NVLink is up on this GPU."
            )
            continue
        if inactive and _form_factor(gpu) == "sxm":
            fix = Fix(
                f"inspect with `nvidia-smi nvlink -s -i {i}` and `nvidia-smi nvlink -e -i {i}`", manual=True
            )
            yield Finding(fid, AREA, title, Status.FAIL, evidence, why, fix)
            continue
        yield Finding(fid, AREA, title, Status.PASS, evidence, why)


def check_fabric(snap: Snapshot) -> Iterable[Finding]:
    fid, title = "topology.fabric_manager", "NVSwitch fabric manager"
    why = (
        "On HGX/DGX A100, H100 and H200 the NVSwitch fabric must be configured by nvidia-fabricmanager; "
        "without it CUDA fails to initialise or GPUs cannot reach each other."
    )
    gpus = snap.gpus
    sxm = [g for g in gpus if _form_factor(g) == "sxm"]
    switches = [d for d in snap.host.get("pci_nvidia", []) or [] if d.get("kind") == "nvswitch"]
    uses_switch = any(link.get("remote") == "nvswitch" for g in gpus for link in _links(g))
    if len(sxm) < 2 and not switches and not uses_switch:
        yield Finding(
            fid, AREA, title, Status.NOT_APPLICABLE, {"sxm_gpus": len(sxm)}, why + " No NVSwitch here."
        )
        return
    service = (snap.host.get("services") or {}).get("nvidia-fabricmanager", {})
    states = {g["index"]: (g.get("fabric") or {}) for g in gpus}
    fabric_states = {i: (s.get("state") if isinstance(s, dict) else str(s)) for i, s in states.items()}
    evidence = {
        "nvswitch_pci_devices": len(switches),
        "fabricmanager_running": service.get("running"),
        "fabricmanager_enabled": service.get("enabled"),
        "gpu_fabric_state": fabric_states,
    }
    incomplete = [i for i, s in fabric_states.items() if s in ("not_started", "in_progress")]
    running = service.get("running")
    fix = Fix(
        "start the fabric manager (its version must match the driver's)",
        commands=("systemctl enable --now nvidia-fabricmanager",),
    )
    if incomplete or running is False:
        yield Finding(fid, AREA, title, Status.FAIL, {**evidence, "not_ready": incomplete}, why, fix)
        return
    if running is None or isinstance(running, NA):
        yield unknown(fid, AREA, title, "could not tell whether nv-fabricmanager runs", why, **evidence)
        return
    yield Finding(fid, AREA, title, Status.PASS, evidence, why)


def check_numa(snap: Snapshot) -> Iterable[Finding]:
    fid, title = "topology.numa_affinity", "GPU to NUMA/CPU affinity"
    why = (
        "A DataLoader or rank running on the far socket copies every batch across the CPU interconnect; "
        "bind each rank to its GPU's NUMA node."
    )
    gpus = snap.gpus
    nodes = snap.host.get("numa_nodes") or []
    if not gpus:
        yield Finding(fid, AREA, title, Status.NOT_APPLICABLE, {"gpus": 0}, why)
        return
    mapping = {
        f"gpu{g['index']}": {"numa_node": g.get("numa_node"), "cpus": g.get("local_cpulist")} for g in gpus
    }
    evidence: dict[str, Any] = {"numa_nodes": len(nodes), "gpus": mapping}
    if len(nodes) <= 1:
        yield Finding(fid, AREA, title, Status.PASS, evidence, why + " One NUMA node: nothing to bind.")
        return
    unknown_nodes = [
        k for k, v in mapping.items() if not isinstance(v["numa_node"], int) or v["numa_node"] < 0
    ]
    if unknown_nodes:
        evidence["unknown"] = unknown_nodes
        fix = Fix(
            "the firmware reports no NUMA node for some GPUs: enable ACPI SRAT/NUMA reporting in the BIOS",
            manual=True,
        )
        yield Finding(fid, AREA, title, Status.WARN, evidence, why, fix)
        return
    example = next(iter(mapping.values()))
    evidence["launch_hint"] = (
        f"numactl --cpunodebind={example['numa_node']} --membind={example['numa_node']} <rank for gpu0>"
    )
    yield Finding(fid, AREA, title, Status.PASS, evidence, why)


def check_infiniband(snap: Snapshot) -> Iterable[Finding]:
    fid, title = "topology.infiniband", "InfiniBand / RoCE ports"
    why = "Multi-node NCCL runs over these ports; a port that is not ACTIVE silently drops NCCL to TCP."
    ib = snap.host.get("infiniband")
    if isinstance(ib, NA):
        yield unknown(fid, AREA, title, ib.reason, why)
        return
    if not ib:
        yield Finding(fid, AREA, title, Status.NOT_APPLICABLE, {"devices": 0}, why + " No IB devices.")
        return
    ports = {
        f"{dev['name']}/{port.get('port')}": {"state": port.get("state"), "rate": port.get("rate")}
        for dev in ib
        for port in dev.get("ports", [])
    }
    down = sorted(k for k, v in ports.items() if "ACTIVE" not in str(v["state"]))
    evidence = {"ports": ports, "not_active": down}
    if down:
        fix = Fix(f"bring up {', '.join(down)}: check cables and the subnet manager (`ibstat`)", manual=True)
        yield Finding(fid, AREA, title, Status.WARN, evidence, why, fix)
        return
    yield Finding(fid, AREA, title, Status.PASS, evidence, why)


CHECKS = (check_matrix, check_nvlinks, check_fabric, check_numa, check_infiniband)
