#!/usr/bin/env bash
# Writes traces/NAME.log anew for every scenario of traces/scenarios.txt with
# the given hcasim binary (default build/hcasim). Run it when a timing change
# is intended, and review the difference it makes to the traces.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
hcasim="${1:-$root/build/hcasim}"
[ -x "$hcasim" ] || { echo "update_golden_traces: no hcasim binary at $hcasim" >&2; exit 2; }
while IFS='|' read -r name args; do
  name="$(echo "$name" | xargs)"
  [ -z "$name" ] || [ "${name:0:1}" = "#" ] && continue
  # shellcheck disable=SC2086
  "$hcasim" $args --trace "$root/traces/$name.log" > /dev/null
  echo "traces/$name.log: $(wc -l < "$root/traces/$name.log") lines"
done < "$root/traces/scenarios.txt"
