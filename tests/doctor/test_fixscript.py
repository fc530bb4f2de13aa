"""The fix script: shellcheck-clean, idempotent (rehearsed twice into a scratch root), and only lines for
findings that failed or warned."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from dgxperf.doctor.fixscript import LIMITS_FILE, SYSCTL_FILE, UDEV_FILE, render_fix_script
from dgxperf.results import Finding, Fix, Status

UDEV_RULE = 'ACTION=="add|change", KERNEL=="nvme[0-9]*n[0-9]*", ATTR{queue/scheduler}="none"'

FINDINGS = [
    Finding(
        "os.sysctl.vm.max_map_count",
        "os",
        "map count",
        Status.WARN,
        {"value": "65530"},
        "why it matters",
        Fix("raise it", sysctl=(("vm.max_map_count", "262144"),)),
        guide="A §2.2",
    ),
    Finding(
        "os.sysctl.net.ipv4.tcp_rmem",
        "os",
        "tcp",
        Status.WARN,
        {},
        "why",
        Fix("widen", sysctl=(("net.ipv4.tcp_rmem", "4096 87380 16777216"),)),
    ),
    Finding(
        "storage.scheduler.nvme0n1",
        "storage",
        "scheduler",
        Status.WARN,
        {},
        "why",
        Fix("none", commands=("echo none > /sys/block/nvme0n1/queue/scheduler",), udev=(UDEV_RULE,)),
    ),
    Finding(
        "storage.scheduler.nvme1n1",
        "storage",
        "scheduler",
        Status.WARN,
        {},
        "why",
        Fix("none", commands=("echo none > /sys/block/nvme1n1/queue/scheduler",), udev=(UDEV_RULE,)),
    ),
    Finding(
        "gpu.persistence.gpu0",
        "gpu",
        "persistence",
        Status.FAIL,
        {},
        "why",
        Fix("enable", commands=("nvidia-smi -i 0 -pm 1", "# or: systemctl enable --now nvidia-persistenced")),
    ),
    Finding(
        "os.memlock",
        "os",
        "memlock",
        Status.WARN,
        {},
        "why",
        Fix("unlimited", limits=("* soft memlock unlimited",)),
    ),
    Finding(
        "gpu.memory_health.gpu0",
        "gpu",
        "remap",
        Status.FAIL,
        {},
        "why",
        Fix("reset the GPU", commands=("nvidia-smi -r -i 0",), manual=True),
    ),
    Finding("gpu.ecc_mode.gpu0", "gpu", "ecc", Status.PASS, {}, "why"),
    Finding("os.thp", "os", "thp", Status.UNKNOWN, {}, "why"),
    Finding("os.sysctl.vm.swappiness", "os", "swap", Status.PASS, {"value": "10"}, "why"),
]


def render() -> str:
    return render_fix_script(FINDINGS, hostname="node1", created_at="2026-12-02T00:00:00Z", version="0.1.0")


def test_only_failed_and_warned_findings_appear():
    script = render()
    for finding in FINDINGS:
        present = finding.id in script
        assert present == finding.status.needs_action, finding.id
    assert "vm.swappiness" not in script


def test_manual_fixes_are_never_run():
    script = render()
    assert "run 'nvidia-smi -r -i 0'" not in script
    assert "# needs a person's judgement, not run: nvidia-smi -r -i 0" in script
    assert "run 'nvidia-smi -i 0 -pm 1'" in script


@pytest.mark.skipif(
    shutil.which("shellcheck") is None, reason="shellcheck not installed (.ci/run installs it)"
)
def test_shellcheck_clean(tmp_path: Path):
    path = tmp_path / "fix.sh"
    path.write_text(render())
    result = subprocess.run(["shellcheck", "-s", "bash", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_rehearsal_twice_writes_the_same_files_and_touches_nothing_else(tmp_path: Path):
    path = tmp_path / "fix.sh"
    path.write_text(render())
    root = tmp_path / "root"
    env = {**os.environ, "DESTDIR": str(root)}
    first = subprocess.run(["bash", str(path)], capture_output=True, text=True, env=env)
    assert first.returncode == 0, first.stderr
    snapshot = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    second = subprocess.run(["bash", str(path)], capture_output=True, text=True, env=env)
    assert second.returncode == 0
    assert second.stdout == first.stdout
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == snapshot
    assert sorted(str(p.relative_to(root)) for p in snapshot) == sorted(
        f.lstrip("/") for f in (SYSCTL_FILE, UDEV_FILE, LIMITS_FILE)
    )
    sysctl = (root / SYSCTL_FILE.lstrip("/")).read_text()
    assert "vm.max_map_count = 262144" in sysctl
    assert "net.ipv4.tcp_rmem = 4096 87380 16777216" in sysctl
    udev = (root / UDEV_FILE.lstrip("/")).read_text()
    assert udev.count(UDEV_RULE) == 1  # two devices, one rule
    assert "+ echo none > /sys/block/nvme0n1/queue/scheduler" in first.stdout
    assert "+ sysctl -p /etc/sysctl.d/99-dgxperf.conf" in first.stdout


def test_refuses_to_run_as_a_normal_user_without_destdir():
    # The script comes on stdin: pytest's temporary folders are private to root.
    command = ["bash", "-s"]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv to drop privileges")
        command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *command]
    env = {k: v for k, v in os.environ.items() if k != "DESTDIR"}
    result = subprocess.run(command, input=render(), capture_output=True, text=True, env=env, cwd="/")
    assert result.returncode == 1 and "run as root" in result.stderr


def test_nothing_to_fix_gives_a_script_that_does_nothing(tmp_path: Path):
    script = render_fix_script(FINDINGS[-3:], hostname="n", created_at="t", version="v")
    path = tmp_path / "fix.sh"
    path.write_text(script)
    result = subprocess.run(
        ["bash", str(path)],
        capture_output=True,
        text=True,
        env={**os.environ, "DESTDIR": str(tmp_path / "r")},
    )
    assert result.returncode == 0
    assert not (tmp_path / "r").exists()
    assert "0 finding(s)" in script
