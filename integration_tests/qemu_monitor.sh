#!/usr/bin/env bash
# Sends HMP commands to a QEMU monitor listening on 127.0.0.1:PORT
# (-monitor tcp:127.0.0.1:PORT,server,nowait): the VM lab host's power
# switch in tests ("system_reset" then "cont" is a power cycle of a guest
# that hung or was stopped).
#   qemu_monitor.sh PORT COMMAND...
set -euo pipefail
port=$1; shift
exec 3<>"/dev/tcp/127.0.0.1/$port"
for c in "$@"; do printf '%s\n' "$c" >&3; sleep 0.2; done
exec 3>&-
echo "qemu monitor 127.0.0.1:$port: sent $*"
