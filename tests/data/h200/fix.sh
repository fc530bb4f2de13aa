#!/usr/bin/env bash
# dgxperf doctor fix script — generated 2026-12-02T15:35:18Z on vm by dgxperf 0.1.0.
#
# It applies the fixes of 3 finding(s) that failed or warned. Read every line before you run it:
# it changes system settings, and dgxperf never runs it for you.
#   run:        sudo bash fix.sh
#   rehearse:   DESTDIR=/tmp/rehearsal bash fix.sh   (writes the files under /tmp/rehearsal, only prints commands)
# Running it twice leaves the node as running it once does.
set -euo pipefail

DESTDIR="${DESTDIR:-}"
if [[ -z "$DESTDIR" && $EUID -ne 0 ]]; then
  echo "run as root (sudo bash $0), or rehearse with DESTDIR=/tmp/rehearsal" >&2
  exit 1
fi

# Runs one fix command, or only shows it during a rehearsal.
run() {
  echo "+ $1"
  if [[ -z "$DESTDIR" ]]; then
    bash -c "$1"
  fi
}

# Writes a whole drop-in file (same content every time, so re-running changes nothing).
write_file() {
  local path="$DESTDIR$1"
  mkdir -p "$(dirname "$path")"
  printf '%s\n' "$2" > "$path"
  echo "wrote $path"
}

# --- [warn] os.sysctl.net.core.rmem_max: Largest socket receive buffer
# why: The largest receive buffer a program may ask for with SO_RCVBUF; NCCL's socket transport and data loading over TCP on 100 Gb/s links need more than the default. Guide A §2.2 sets 16 MiB. It does not affect InfiniBand verbs or NVLink traffic. (guide A §2.2)
# fix: set net.core.rmem_max = 16777216
#   sysctl net.core.rmem_max = 16777216  -> /etc/sysctl.d/99-dgxperf.conf

# --- [warn] os.sysctl.net.core.wmem_max: Largest socket send buffer
# why: The largest send buffer a program may ask for with SO_SNDBUF; NCCL's socket transport and data loading over TCP on 100 Gb/s links need more than the default. Guide A §2.2 sets 16 MiB. It does not affect InfiniBand verbs or NVLink traffic. (guide A §2.2)
# fix: set net.core.wmem_max = 16777216
#   sysctl net.core.wmem_max = 16777216  -> /etc/sysctl.d/99-dgxperf.conf

# --- [warn] os.sysctl.net.ipv4.tcp_wmem: TCP send buffer auto-tuning range
# why: min, default and max of a TCP connection's send buffer; auto-tuning never grows a buffer past the max, which caps one connection's throughput at max / round-trip time. Guide A §2.2 sets '4096 65536 16777216'; the fix keeps a larger min or default that the kernel already has. (guide A §2.2)
# fix: set net.ipv4.tcp_wmem = 4096 65536 16777216
#   sysctl net.ipv4.tcp_wmem = 4096 65536 16777216  -> /etc/sysctl.d/99-dgxperf.conf

# --- persistent kernel settings (os.sysctl.net.core.rmem_max, os.sysctl.net.core.wmem_max, os.sysctl.net.ipv4.tcp_wmem)
write_file /etc/sysctl.d/99-dgxperf.conf '# written by dgxperf doctor --fix-script on vm (guide A §2.2)
net.core.rmem_max = 16777216
net.core.wmem_max = 16777216
net.ipv4.tcp_wmem = 4096 65536 16777216'
run 'sysctl -p /etc/sysctl.d/99-dgxperf.conf'

echo 'dgxperf fix script: done. Re-run dgxperf doctor to check.'
