#!/usr/bin/env bash
# scripts/demo --real as a test (label slow: kernel builds and ~80 guest
# boots, tens of minutes). Part 1: the test tree's planted regression found,
# confirmed and bisected on built kernels; the demo exits non-zero unless the
# culprit is the planted commit, and this checks the culprit line and the
# alert. Part 2: two Debian arm64 cloud kernels x off, passthrough, strict,
# lazy x fio randread x 3 repeats on two vm agents; the demo exits 0 only if
# every cell ran, and this checks that every mode's guest reported the group
# type that mode means on SMMUv3.
# Needs: scripts/make-test-kernel-tree and scripts/fetch-test-kernels --arch arm64 --previous
# (scripts/test runs both as root; the demo runs them itself).
#   demo_real_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
SRC=$1 BUILD=$2
DIR=$(mktemp -d "${FARM_TEST_TMPDIR:-/tmp}/demo-real-XXXXXX")
trap 'rm -rf "$DIR"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
out=$(BUILD_DIR=$BUILD "$SRC/scripts/demo" --real --no-build --dir "$DIR/farm" 2>&1) ||
  fail "scripts/demo --real failed: $(tail -n 40 <<<"$out")"
echo "$out" | tail -n 40
planted=$("$SRC/scripts/make-test-kernel-tree" | awk '$1 == "planted" {print $2}')
grep -q "^culprit $planted: the planted commit" <<<"$out" || fail "part 1 named no culprit $planted"
grep -qE "\"culprit\": *\"$planted\"" <<<"$out" || fail "part 1 printed no alert naming $planted"
grep -q "^passthrough: no regression" <<<"$out" || fail "part 1: passthrough not checked"
# Each of the 2 kernels (catalog ids v6.1.N, booted as *-cloud-arm64) x 4
# modes ran its 3 repeats under the mode asked (farmctl results' kernel table).
for mode in off:"no IOMMU" passthrough:identity strict:DMA lazy:DMA-FQ; do
  m=${mode%%:*}
  n=$(grep -cE "^v[0-9][^ ]* +[^ ]+-cloud-arm64 +$m +${mode#*:} +$m +virt\+smmuv3 +tcg-icount +3$" <<<"$out" || true)
  [[ $n -eq 2 ]] || fail "mode ${mode%%:*}: expected 2 kernels x 3 runs as ${mode#*:}, got $n rows"
done
grep -q "matrix [0-9]* analysed" <<<"$out" || fail "no analyzer conclusion"
echo "scripts/demo --real: the planted commit bisected; every cell ran under its mode"
