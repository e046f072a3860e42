#!/usr/bin/env bash
# The analyzer stays up whatever valid matrix users submit: a farm of
# scripts/farm-local (scheduler, two emulator agents, farm-analyzer) takes
# a matrix of one run per commit in every mode over v4.6..v6.6 (no split
# has two samples a side: the detector's hardest start) and N random valid specs over the shipped
# catalog (random platforms, commit ranges and lists, mode subsets,
# workloads with short params, 1..3 repeats). Every matrix must end with its
# analysis recorded (`farmctl status ID`: "analysis: ..."), and farm-analyzer
# must still be running at the end.
#   analyzer_chaos_test.sh SOURCE_DIR BUILD_DIR
# FARM_CHAOS_SPECS (default 6) random specs; FARM_CHAOS_SEED (default: the
# date's day number) chooses them; the seed is printed to repeat a failure.
set -euo pipefail
SRC=$1 BUILD=$2
SPECS=${FARM_CHAOS_SPECS:-6}
SEED=${FARM_CHAOS_SEED:-$(($(date +%s) / 86400))}
DIR=$(mktemp -d "${FARM_TEST_TMPDIR:-/tmp}/farm-chaos-XXXXXX")
export BUILD_DIR=$BUILD
FARMCTL=$BUILD/bin/farmctl
cleanup() { "$SRC/scripts/farm-local" down --dir "$DIR/farm" >/dev/null 2>&1 || true; rm -rf "$DIR"; }
trap cleanup EXIT
fail() {
  echo "FAIL (seed $SEED): $*" >&2
  tail -n 30 "$DIR/farm/analyzer.log" >&2 2>/dev/null || true
  exit 1
}
echo "analyzer chaos: $SPECS random specs, seed $SEED"

eval "$("$SRC/scripts/farm-local" up --dir "$DIR/farm" --plaintext --agents 2 --analyzer)"

cat >"$DIR/spec-0.yaml" <<'SPEC'
name: one-run-per-commit
catalog: linux-iommu
platform: intel-vtd-snb16c
commits: v4.6..v6.6
modes: [off, strict, lazy, passthrough]
workloads: [{name: dma-map-bench, params: {threads: 1, seconds: 0.01, granule: 1}}]
repeats: 1
executor: emulator
SPEC

# Random valid specs from what the farm ships: the emulator's platforms and
# workloads (farm-emu list) and the linux-iommu catalog's commits.
"$BUILD/bin/farm-emu" list platforms >"$DIR/platforms.txt"
"$BUILD/bin/farm-emu" list workloads >"$DIR/workloads.txt"
python3 - "$SRC/emu/model/catalogs/linux-iommu.yaml" "$DIR" "$SPECS" "$SEED" <<'PY'
import random, re, sys
catalog, out, n, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
commits = re.findall(r'^  - id: "?([^"\s]+)', open(catalog).read(), re.M)
platforms = [l.split()[0] for l in open(out + "/platforms.txt") if l[:1].strip()]
workloads, params = [], {}
for line in open(out + "/workloads.txt"):
    if line[:1].strip():
        workloads.append(line.split()[0]); params[workloads[-1]] = set()
    m = re.match(r'\s+--param (\w+)=', line)
    if m: params[workloads[-1]].add(m.group(1))
# Short runs: the fewest virtual seconds and threads each workload takes.
short = {"seconds": 0.005, "warmup": 0.001, "threads": 1, "jobs": 1, "numjobs": 1,
         "instances": 2, "sessions": 1, "size": "1m", "runtime_ms": 2}
for i in range(1, n + 1):
    w = rng.choice(workloads)
    p = {k: v for k, v in short.items() if k in params[w]}
    a = rng.randrange(len(commits))
    b = rng.randrange(a, min(len(commits), a + rng.choice([1, 3, 12, 40])))
    if rng.random() < 0.5:
        spec_commits = f"{commits[a]}..{commits[b]}"
    else:
        spec_commits = "[" + ", ".join(sorted(set(rng.sample(commits[a:b + 1], min(b - a + 1, 4))),
                                              key=commits.index)) + "]"
    modes = rng.sample(["off", "passthrough", "strict", "lazy"], rng.randint(1, 4))
    plats = rng.sample(platforms, rng.choice([1, 1, 2]))
    with open(f"{out}/spec-{i}.yaml", "w") as f:
        f.write(f"name: chaos-{seed}-{i}\ncatalog: linux-iommu\n"
                f"platform: [{', '.join(plats)}]\ncommits: {spec_commits}\n"
                f"modes: [{', '.join(modes)}]\n"
                f"workloads: [{{name: {w}, params: {{{', '.join(f'{k}: {v}' for k, v in p.items())}}}}}]\n"
                f"repeats: {rng.randint(1, 3)}\nexecutor: emulator\n")
PY

ids=()
for spec in "$DIR"/spec-*.yaml; do
  out=$("$FARMCTL" submit "$spec" 2>&1) || fail "submit $(basename "$spec") refused: $out$(echo; cat "$spec")"
  id=$(grep -oE 'submitted matrix [0-9]+' <<<"$out" | awk '{print $3}')
  [[ -n $id ]] || fail "no matrix id in: $out"
  ids+=("$id")
  echo "matrix $id: $(grep -E '^(platform|commits|modes|workloads|repeats):' "$spec" | tr '\n' ' ')"
done

# Every matrix ends and is analysed (or marked failed analysis), within a
# bound; the analyzer must live through all of it.
deadline=$((SECONDS + ${FARM_CHAOS_TIMEOUT:-900}))
for id in "${ids[@]}"; do
  while :; do
    analysis=$("$FARMCTL" status "$id" --output json |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["matrices"][0].get("analysis", ""))')
    [[ -n $analysis ]] && break
    "$SRC/scripts/farm-local" status --dir "$DIR/farm" >/dev/null 2>&1 ||
      fail "a farm process stopped while matrix $id waited: $("$SRC/scripts/farm-local" status --dir "$DIR/farm" 2>&1)"
    ((SECONDS < deadline)) || fail "matrix $id not analysed in time: $("$FARMCTL" status "$id")"
    sleep 2
  done
  echo "matrix $id analysis: $analysis"
done
"$SRC/scripts/farm-local" status --dir "$DIR/farm" >"$DIR/status.txt" 2>&1 ||
  fail "not all of the farm runs at the end: $(cat "$DIR/status.txt")"
grep -q 'farm-analyzer' "$DIR/status.txt" || fail "farm-local status does not list farm-analyzer"
echo "farm-analyzer up after ${#ids[@]} matrices"
