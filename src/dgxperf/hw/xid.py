"""XID errors: the driver's reports of GPU faults, as the kernel log prints them, and which are the
hardware's (the GPU needs a reset or an RMA) and which an application's (a program faulted)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

HARDWARE_XIDS = frozenset({48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140})
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 69})

XID_LINE = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+(?:\.[0-7])?)\):\s*(?P<xid>\d+)"
    r"(?:,\s*(?P<rest>.*))?"
)
TIMESTAMP = re.compile(r"^\[\s*(\d+\.\d+)\]\s*")


def parse_xids(lines: Iterable[str]) -> list[dict[str, Any]]:
    """Every ``NVRM: Xid (PCI:0000:18:00): 79, pid=..., name=..., message`` line as a dict.

    Keys: xid (int), pci (``0000:18:00``, lower case), pid (int or None), name (str or None),
    message (the rest of the line), seconds (the log timestamp or None), line (the whole line).
    """
    found = []
    for line in lines:
        match = XID_LINE.search(line)
        if not match:
            continue
        rest = match.group("rest") or ""
        pid_match = re.search(r"pid=(?:'([^']*)'|([^,\s]*))", rest)
        pid_text = (pid_match.group(1) or pid_match.group(2) or "") if pid_match else ""
        name_match = re.search(r"name=(?:'([^']*)'|([^,]*))", rest)
        name = (name_match.group(1) or name_match.group(2) or "").strip() if name_match else ""
        message = re.sub(r"^(?:pid=(?:'[^']*'|[^,]*),\s*)?(?:name=(?:'[^']*'|[^,]*),\s*)?", "", rest).strip()
        stamp = TIMESTAMP.match(line)
        domain, bus, device = match.group("pci").split(".")[0].split(":")
        found.append(
            {
                "xid": int(match.group("xid")),
                "pci": f"{int(domain, 16):04x}:{int(bus, 16):02x}:{int(device, 16):02x}",
                "pid": int(pid_text) if pid_text.isdigit() else None,
                "name": name if name and name != "<unknown>" else None,
                "message": message,
                "seconds": float(stamp.group(1)) if stamp else None,
                "line": line,
            }
        )
    return found
