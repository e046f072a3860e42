#!/usr/bin/env bash
# scripts/demo --real as a test (label slow: 24 TCG boots, minutes): two
# Debian arm64 cloud kernels x off, passthrough, strict, lazy x fio randread
# x 3 repeats on two vm agents. The demo exits 0 only if every cell ran;
# this also checks that every mode's guest reported the group type that
# mode means on SMMUv3.
#   demo_real_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
SRC=$1 BUILD=$2
DIR=$(mktemp -d "${FARM_TEST_TMPDIR:-/tmp}/demo-real-XXXXXX")
trap 'rm -rf "$DIR"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
out=$(BUILD_DIR=$BUILD "$SRC/scripts/demo" --real --no-build --dir "$DIR/farm" 2>&1) ||
  fail "scripts/demo --real failed: $(tail -n 40 <<<"$out")"
echo "$out" | tail -n 40
# Each of the 2 kernels x 4 modes ran its 3 repeats under the mode asked.
for mode in off:"no IOMMU" passthrough:identity strict:DMA lazy:DMA-FQ; do
  n=$(grep -cE "^ *[^ ]+-cloud-arm64 +\| [^ ]+-cloud-arm64 +\| ${mode%%:*} +\| ${mode#*:} +\| virt\+smmuv3 +\| tcg-icount +\| +3$" <<<"$out" || true)
  [[ $n -eq 2 ]] || fail "mode ${mode%%:*}: expected 2 kernels x 3 runs as ${mode#*:}, got $n rows"
done
grep -q "matrix [0-9]* analysed" <<<"$out" || fail "no analyzer conclusion"
echo "scripts/demo --real: every cell ran under its mode"
