#!/usr/bin/env bash
# scripts/farm-local up --vm-kernels STORE with a store farm-local never
# wrote: a hand-written kernel.yaml (commit "hand-made-1", its files linked
# from the prepared kernel cache) becomes the vm-kernels catalog and the vm
# agent offers it. And an up that fails (a store with no kernel of the
# guest arch, only one of the other) stops the scheduler and PostgreSQL it
# had started, naming the arch that is missing.
#   farm_local_vm_store_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
SRC=$1 BUILD=$2
DIR=$(mktemp -d "${FARM_TEST_TMPDIR:-/tmp}/farm-local-vmstore-XXXXXX")
export BUILD_DIR=$BUILD
FARMCTL=$BUILD/bin/farmctl
cleanup() {
  "$SRC/scripts/farm-local" down --dir "$DIR/farm" >/dev/null 2>&1 || true
  "$SRC/scripts/farm-local" down --dir "$DIR/failed" >/dev/null 2>&1 || true
  rm -rf "$DIR"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# The caller's farm must not leak in (farm-local unsets FARM_* itself too).
unset "${!FARM_@}" 2>/dev/null || true

# 1. A failed up leaves nothing running. The store is valid, only not of the
# architecture asked for: the reason names the one missing and what it holds.
mkdir -p "$DIR/arm-store/arm-1"
: >"$DIR/arm-store/arm-1/Image"
printf 'commit: arm-1\nrelease: 6.1.0-0-arm64\narch: aarch64\nimage: Image\n' \
  >"$DIR/arm-store/arm-1/kernel.yaml"
if "$SRC/scripts/farm-local" up --dir "$DIR/failed" --agents 0 --vm-agents 1 --vm-arch x86_64 \
  --vm-kernels "$DIR/arm-store" >"$DIR/failed.out" 2>&1; then
  fail "up with no x86_64 kernel in the store succeeded"
fi
grep -q "no x86_64 kernel under $DIR/arm-store (it holds aarch64 builds: --vm-arch aarch64)" \
  "$DIR/failed.out" || fail "no reason given: $(cat "$DIR/failed.out")"
grep -q "up failed: stopping what it started" "$DIR/failed.out" || fail "no cleanup: $(cat "$DIR/failed.out")"
# Nothing listens where the failed up's PostgreSQL and scheduler did.
for what in "postgres ready on" "farm-scheduler on"; do
  addr=$(sed -n "s/.*$what \(127\.0\.0\.1:[0-9]*\).*/\1/p" "$DIR/failed.out" | head -n1)
  [[ -n $addr ]] || fail "no '$what' address in: $(cat "$DIR/failed.out")"
  if (exec 3<>"/dev/tcp/${addr%:*}/${addr#*:}") 2>/dev/null; then
    fail "$what $addr still accepts after a failed up"
  fi
done
status=$("$SRC/scripts/farm-local" status --dir "$DIR/failed" 2>&1 || true)
grep -q "farm-scheduler  stopped" <<<"$status" || fail "scheduler still runs: $status"

# 2. A hand-written store.
CACHE=${FARM_KERNEL_CACHE:-/var/cache/iommu-farm/kernels}
listing=$("$FARMCTL" kernels list --store "$CACHE" -o csv 2>/dev/null) ||
  fail "no prepared kernel cache at $CACHE (scripts/fetch-test-kernels --arch amd64)"
src_dir=
while IFS=, read -r _ arch _ _ dir _ _ _ modules; do
  [[ $arch == x86_64 && -z $modules ]] && { src_dir=$dir; break; }
done < <(tail -n +2 <<<"$listing")
[[ -n $src_dir ]] || fail "no module-less x86_64 kernel in $CACHE: $listing"
release=$(sed -n 's/^release: *//p' "$src_dir/kernel.yaml" 2>/dev/null || basename "$src_dir")
mkdir -p "$DIR/store/hand-made"
ln -s "$src_dir/vmlinuz" "$DIR/store/hand-made/bzImage"
[[ -f $src_dir/config ]] && ln -s "$src_dir/config" "$DIR/store/hand-made/config"
cat >"$DIR/store/hand-made/kernel.yaml" <<YAML
commit: hand-made-1
release: $release
arch: x86_64
image: bzImage
$([[ -f $src_dir/config ]] && echo "config: config")
YAML
eval "$("$SRC/scripts/farm-local" up --dir "$DIR/farm" --agents 0 --vm-agents 1 --vm-arch x86_64 \
  --vm-kernels "$DIR/store" 2>"$DIR/up.err")" || fail "up failed: $(tail -n 20 "$DIR/up.err")"
catalog=$(FARM_TOKEN_FILE=$DIR/farm/admin.token "$FARMCTL" catalog show vm-kernels -o csv)
grep -q '^0,hand-made-1,' <<<"$catalog" || fail "vm-kernels catalog: $catalog"
grep -q "vm kernels offered.*hand-made-1" "$DIR/farm/vm-agent-1.log" ||
  fail "the vm agent does not offer hand-made-1: $(grep -m3 'vm kernels' "$DIR/farm/vm-agent-1.log")"
echo "hand-written kernel store offered: $(grep -m1 'vm kernels offered' "$DIR/farm/vm-agent-1.log")"
