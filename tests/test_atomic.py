from pathlib import Path

import pytest

from dgxperf.atomic import atomic_write


def test_success_replaces_and_failure_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "f.bin"
    with atomic_write(target) as handle:
        handle.write(b"one")
    assert target.read_bytes() == b"one"
    with pytest.raises(RuntimeError), atomic_write(target) as handle:
        handle.write(b"half of two")
        raise RuntimeError("killed in the middle")
    assert target.read_bytes() == b"one"
    assert [p.name for p in target.parent.iterdir()] == ["f.bin"]  # no temporary file left behind
