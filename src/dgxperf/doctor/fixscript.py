"""``dgxperf doctor --fix-script FILE``: one shell script, for a person to review and run, that applies every
fix of a failed or warned finding. dgxperf itself never runs any of it.

The script is idempotent: persistent settings are written as whole drop-in files (sysctl.d, udev rules,
limits.d) with fixed content, and every command sets a state rather than toggling one. With ``DESTDIR``
set it writes the files under that folder and only prints the commands — a rehearsal that touches nothing.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from dgxperf.results import Finding

SYSCTL_FILE = "/etc/sysctl.d/99-dgxperf.conf"
UDEV_FILE = "/etc/udev/rules.d/60-dgxperf.rules"
LIMITS_FILE = "/etc/security/limits.d/99-dgxperf.conf"

HEADER = """#!/usr/bin/env bash
# dgxperf doctor fix script — generated {created_at} on {hostname} by dgxperf {version}.
#
# It applies the fixes of {count} finding(s) that failed or warned. Read every line before you run it:
# it changes system settings, and dgxperf never runs it for you.
#   run:        sudo bash {name}
#   rehearse:   DESTDIR=/tmp/rehearsal bash {name}   (writes the files under /tmp/rehearsal, only prints commands)
# Running it twice leaves the node as running it once does.
set -euo pipefail

DESTDIR="${{DESTDIR:-}}"
if [[ -z "$DESTDIR" && $EUID -ne 0 ]]; then
  echo "run as root (sudo bash $0), or rehearse with DESTDIR=/tmp/rehearsal" >&2
  exit 1
fi

# Runs one fix command, or only shows it during a rehearsal.
run() {{
  echo "+ $1"
  if [[ -z "$DESTDIR" ]]; then
    bash -c "$1"
  fi
}}

# Writes a whole drop-in file (same content every time, so re-running changes nothing).
write_file() {{
  local path="$DESTDIR$1"
  mkdir -p "$(dirname "$path")"
  printf '%s\\n' "$2" > "$path"
  echo "wrote $path"
}}
"""


def _comment(text: str, prefix: str = "# ") -> list[str]:
    return [f"{prefix}{line}".rstrip() for line in str(text).splitlines() or [""]]


def render_fix_script(
    findings: Sequence[Finding], *, hostname: str, created_at: str, version: str, name: str = "dgxperf-fix.sh"
) -> str:
    actionable = [f for f in findings if f.status.needs_action and f.fix is not None]
    lines = HEADER.format(
        created_at=created_at, hostname=hostname, version=version, count=len(actionable), name=name
    ).splitlines()
    sysctl: dict[str, tuple[str, str]] = {}
    udev: list[tuple[str, str]] = []
    limits: list[tuple[str, str]] = []

    for finding in actionable:
        fix = finding.fix
        assert fix is not None
        lines.append("")
        lines.append(f"# --- [{finding.status.value}] {finding.id}: {finding.title}")
        lines += _comment(f"why: {finding.why}" + (f" (guide {finding.guide})" if finding.guide else ""))
        lines += _comment(f"fix: {fix.summary}")
        for key, value in fix.sysctl:
            sysctl[key] = (value, finding.id)
            lines.append(f"#   sysctl {key} = {value}  -> {SYSCTL_FILE}")
        for rule in fix.udev:
            if rule not in (r for r, _ in udev):
                udev.append((rule, finding.id))
            lines.append(f"#   udev rule -> {UDEV_FILE}")
        for limit in fix.limits:
            if limit not in (entry for entry, _ in limits):
                limits.append((limit, finding.id))
            lines.append(f"#   limit '{limit}' -> {LIMITS_FILE}")
        for command in fix.commands:
            if command.startswith("#"):
                lines.append(command)
            elif fix.manual:
                lines.append(f"# needs a person's judgement, not run: {command}")
            else:
                lines.append(f"run {shlex.quote(command)}")
        if fix.manual and not fix.commands:
            lines.append("# needs a person's judgement: nothing to run here")

    if sysctl:
        body = [f"# written by dgxperf doctor --fix-script on {hostname} (guide A §2.2)"]
        body += [f"{key} = {value}" for key, (value, _) in sorted(sysctl.items())]
        lines += [
            "",
            f"# --- persistent kernel settings ({', '.join(sorted({fid for _, fid in sysctl.values()}))})",
        ]
        lines.append(f"write_file {SYSCTL_FILE} {shlex.quote(chr(10).join(body))}")
        lines.append(f"run {shlex.quote('sysctl -p ' + SYSCTL_FILE)}")
    if udev:
        body = [f"# written by dgxperf doctor --fix-script on {hostname} (guide A §2.2, guide B §2.3)"]
        body += [rule for rule, _ in udev]
        lines += ["", f"# --- block-device udev rules ({', '.join(sorted({fid for _, fid in udev}))})"]
        lines.append(f"write_file {UDEV_FILE} {shlex.quote(chr(10).join(body))}")
        lines.append(f"run {shlex.quote('udevadm control --reload-rules')}")
        lines.append(f"run {shlex.quote('udevadm trigger --subsystem-match=block --action=change')}")
    if limits:
        body = [f"# written by dgxperf doctor --fix-script on {hostname}"]
        body += [entry for entry, _ in limits]
        lines += [
            "",
            f"# --- resource limits, effective at the next login ({', '.join(sorted({f for _, f in limits}))})",
        ]
        lines.append(f"write_file {LIMITS_FILE} {shlex.quote(chr(10).join(body))}")
    lines += ["", "echo 'dgxperf fix script: done. Re-run dgxperf doctor to check.'", ""]
    return "\n".join(lines)
