#!/bin/sh
# promtool unit tests of the alerting rules (prometheus-rules.test.yml), and a
# failure when an alert of prometheus-rules.yml has no test there.
set -eu
cd "$(dirname "$0")"
command -v promtool >/dev/null || { echo "promtool missing: run scripts/install-deps" >&2; exit 1; }
promtool test rules prometheus-rules.test.yml
for a in $(sed -n 's/^ *- alert: *//p' prometheus-rules.yml); do
  if ! grep -q "alertname: $a\$" prometheus-rules.test.yml; then
    echo "alert $a has no promtool test in prometheus-rules.test.yml" >&2
    exit 1
  fi
done
