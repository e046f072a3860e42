#!/usr/bin/env bash
# scripts/farm-local up --real-agent DIR: the walk-through of docs/usage.md
# ("A real fio matrix on this machine") as a test. The spec names this host's
# kernel release and the IOMMU mode its agent detected, exactly as a user
# writes it; the one fio job must run on local-real-agent, inside DIR, and
# its result must carry the host's kernel.
#   farm_local_real_agent_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
SRC=$1 BUILD=$2
DIR=$(mktemp -d "${FARM_TEST_TMPDIR:-/tmp}/farm-local-real-XXXXXX")
SCRATCH=$DIR/scratch
mkdir -p "$SCRATCH"
export BUILD_DIR=$BUILD
cleanup() { "$SRC/scripts/farm-local" down --dir "$DIR/farm" >/dev/null 2>&1 || true; rm -rf "$DIR"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v fio >/dev/null || { echo "fio not installed; skipped" >&2; exit 77; }

eval "$("$SRC/scripts/farm-local" up --dir "$DIR/farm" --agents 0 --real-agent "$SCRATCH")"
"$BUILD/bin/farmctl" catalog list | grep -q '^host-kernels' || fail "no host-kernels catalog: $("$BUILD/bin/farmctl" catalog list)"
mode=$("$BUILD/bin/farmctl" agents --output json |
  python3 -c 'import json,sys
a = [x for x in json.load(sys.stdin).get("agents", []) if x["name"] == "local-real-agent"]
print(a[0]["host"].get("iommu_mode", "").removeprefix("IOMMU_MODE_").lower() if a else "")')
[[ -n $mode && $mode != unspecified ]] || fail "local-real-agent detected no IOMMU mode ('$mode')"

cat >"$DIR/real.yaml" <<SPEC
name: real-fio-walkthrough
catalog: host-kernels
platform: this-host
executor: fio
commits: ["$(uname -r)"]
modes: [$mode]
workloads:
  - name: fio-randread
    params: {rw: randread, bs: 4k, size: 8m, runtime: 1, time_based: true}
repeats: 1
SPEC
out=$("$BUILD/bin/farmctl" submit --wait "$DIR/real.yaml" 2>&1) || fail "submit --wait: $out"
echo "$out" | tail -3
id=$(grep -oE 'matrix [0-9]+' <<<"$out" | head -1 | awk '{print $2}')
[[ -n $id ]] || fail "no matrix id in: $out"
results=$("$BUILD/bin/farmctl" results "$id" --output csv 2>&1) || fail "results: $results"
grep -q "local-real-agent" <<<"$results" || fail "no result from local-real-agent: $results"
grep -q ",$(uname -r)," <<<"$results" || fail "result does not carry the host kernel $(uname -r): $results"
echo "real fio job ran on local-real-agent ($(uname -r), mode $mode)"
