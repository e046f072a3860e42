#!/usr/bin/env bash
# scripts/farm-local up (mTLS + role tokens) on loopback: farmctl works with
# the printed environment, a plaintext client is refused, and no secret (the
# tokens, the database URI) is on the command line (/proc/PID/cmdline, which
# every user can read) of any process farm-local started.
#   farm_local_secrets_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
SRC=$1 BUILD=$2
DIR=$(mktemp -d "${FARM_TEST_TMPDIR:-/tmp}/farm-local-secrets-XXXXXX")
export BUILD_DIR=$BUILD
cleanup() { "$SRC/scripts/farm-local" down --dir "$DIR" >/dev/null 2>&1 || true; rm -rf "$DIR"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

env_out=$("$SRC/scripts/farm-local" up --dir "$DIR" --agents 1 --analyzer)
eval "$env_out"
[[ -n ${FARM_TLS_CERT:-} && -n ${FARM_TOKEN_FILE:-} ]] || fail "farm-local printed no TLS/token environment: $env_out"

"$BUILD/bin/farmctl" agents | grep -q local-agent-1 || fail "farmctl agents over mTLS did not list local-agent-1"
# Plaintext to the mTLS port fails.
if env -u FARM_TLS_CA -u FARM_TLS_CERT -u FARM_TLS_KEY "$BUILD/bin/farmctl" agents >/dev/null 2>&1; then
  fail "a plaintext farmctl reached the scheduler"
fi

secrets=("$(cat "$DIR/admin.token")" "$(cat "$DIR/user.token")" "$(cat "$DIR/analyzer.token")" "$FARM_PG_URI")
checked=0
for f in "$DIR"/*.pid; do
  read -r pid _ <"$f"
  [[ -r /proc/$pid/cmdline ]] || fail "$(basename "$f" .pid) (pid $pid) is not running"
  cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline")
  for s in "${secrets[@]}"; do
    [[ -n $s ]] || fail "an empty secret"
    [[ $cmd != *"$s"* ]] || fail "$(basename "$f" .pid) has a secret on its command line: $cmd"
  done
  [[ $cmd != *--token* && $cmd != *--db* ]] || fail "$(basename "$f" .pid): $cmd"
  checked=$((checked + 1))
done
[[ $checked -ge 3 ]] || fail "only $checked farm processes found"
echo "no secret on the command line of $checked farm processes"
