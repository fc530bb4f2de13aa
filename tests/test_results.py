import enum

from dgxperf.results import NA, Finding, Fix, Status, from_jsonable, is_na, to_jsonable


def test_na_is_falsy_and_keeps_its_reason():
    na = NA("NVML_ERROR_NOT_SUPPORTED: Not Supported")
    assert not na
    assert is_na(na)
    assert "NOT_SUPPORTED" in str(na)
    assert not is_na(0)


def test_to_jsonable_round_trip_restores_na():
    class Colour(enum.Enum):
        RED = "red"

    value = {"a": NA("gone"), "b": [1, (2, NA("x"))], "c": Colour.RED, "d": b"bytes"}
    plain = to_jsonable(value)
    assert plain == {"a": {"na": "gone"}, "b": [1, [2, {"na": "x"}]], "c": "red", "d": "bytes"}
    back = from_jsonable(plain)
    assert back["a"] == NA("gone")
    assert back["b"][1][1] == NA("x")


def test_from_jsonable_leaves_dicts_with_more_keys_alone():
    assert from_jsonable({"na": "r", "other": 1}) == {"na": "r", "other": 1}


def test_fix_shows_sysctl_as_commands_and_serialises():
    fix = Fix("tune", commands=("echo none > /sys/block/nvme0n1/queue/scheduler",), sysctl=(("vm.a", "1"),))
    assert fix.shown_commands == ["sysctl -w vm.a='1'", "echo none > /sys/block/nvme0n1/queue/scheduler"]
    assert fix.to_json()["sysctl"] == {"vm.a": "1"}


def test_finding_to_json_and_status_needs_action():
    finding = Finding("os.x", "os", "t", Status.WARN, {"v": NA("r")}, "why", Fix("f"), guide="A §2.2")
    data = finding.to_json()
    assert data["status"] == "warn"
    assert data["evidence"] == {"v": {"na": "r"}}
    assert data["fix"]["summary"] == "f"
    assert Status.FAIL.needs_action and Status.WARN.needs_action
    assert not Status.PASS.needs_action and not Status.UNKNOWN.needs_action
