"""The H200 recording replayed through today's checks gives the verdicts doctor printed on the H200.

If a check changes on purpose, regenerate tests/data/h200/doctor.json on the GPU machine
(scripts/h200/capture_doctor.sh) and say so in the commit."""

from __future__ import annotations

import json

from dgxperf.doctor import diagnose

from .snapshots import DATA, h200


def test_replay_matches_what_the_h200_printed() -> None:
    recorded = json.loads((DATA / "h200" / "doctor.json").read_text())
    report = diagnose(h200(), source="snapshot", collect_seconds=0.0)
    replayed = {f.id: f.status.value for f in report.findings}
    assert replayed == {f["id"]: f["status"] for f in recorded["findings"]}
    assert report.to_json()["fingerprint"] == recorded["fingerprint"]


def test_h200_doctor_ran_inside_the_time_budget() -> None:
    log = (DATA / "h200" / "capture-log.txt").read_text()
    walls = [float(line.split()[1]) for line in log.splitlines() if line.startswith("wall ")]
    assert len(walls) == 3 and max(walls) < 10.0
