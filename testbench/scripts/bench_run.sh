#!/usr/bin/env bash
# Speed of `hcasim run` (unmodified programs, each a process of its own):
#  overhead  wall time of one ib_write_bw run (64 KiB, ITERATIONS messages)
#            through hcasim run against the same run in-process (hcasim bw),
#            side by side, three times each, interleaved; the ratio of the
#            fastest of each;
#  scale     16 processes on 16 simulated nodes behind the switch, 8 pairs
#            of ib_send_bw: wall time, and the largest resident set of the
#            simulator or a program (GNU time's maximum).
# Prints one JSON line. Usage: bench_run.sh [BUILD_DIR] [ITERATIONS]
set -euo pipefail
build=${1:-build}
iters=${2:-5000}
hcasim="$build/hcasim"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1

# timed CMD...: runs it, sets wall (s) and rss (KiB); fails the bench if it fails.
timed() {
  if ! /usr/bin/time -f "%e %M" -o "$tmp/time" "$@" >"$tmp/out" 2>&1; then
    echo "bench_run: failed: $*" >&2
    cat "$tmp/out" >&2
    exit 1
  fi
  read -r wall rss <"$tmp/time"
}

best_run=999999
best_inproc=999999
for _ in 1 2 3; do
  timed "$hcasim" run --node "ib_write_bw -s 65536 -n $iters" --node "ib_write_bw -s 65536 -n $iters node0"
  run_mbps=$(awk '/^node1:  65536/ {print $5}' "$tmp/out")
  best_run=$(awk -v a="$wall" -v b="$best_run" 'BEGIN {print (a < b) ? a : b}')
  timed "$hcasim" bw --sizes 65536 -n "$iters" --mtu 2048
  inproc_mbps=$(awk '$1 == 65536 {print $4}' "$tmp/out")
  best_inproc=$(awk -v a="$wall" -v b="$best_inproc" 'BEGIN {print (a < b) ? a : b}')
done

nodes=()
for pair in 0 1 2 3 4 5 6 7; do
  server=$((2 * pair))
  nodes+=(--node "ib_send_bw -s 65536 -n $iters" --node "ib_send_bw -s 65536 -n $iters node$server")
done
timed "$hcasim" run --set fabric.topology=switch "${nodes[@]}"
scale_wall=$wall
scale_rss=$rss
pairs_done=$(grep -c '^node[0-9]*[13579]:  65536' "$tmp/out" || true)

awk -v r="$best_run" -v i="$best_inproc" -v rm="$run_mbps" -v im="$inproc_mbps" -v n="$iters" \
    -v sw="$scale_wall" -v sr="$scale_rss" -v pd="$pairs_done" 'BEGIN {
  printf "{\"bench\":\"hcasim_run\",\"ib_write_bw_iterations\":%d,", n
  printf "\"overhead\":{\"run_wall_seconds\":%s,\"in_process_wall_seconds\":%s,\"ratio\":%.2f,", r, i, r / i
  printf "\"run_MBps\":%s,\"in_process_MBps\":%s},", rm, im
  printf "\"scale\":{\"processes\":16,\"ib_send_bw_pairs\":8,\"pairs_reporting\":%d,", pd
  printf "\"wall_seconds\":%s,\"max_rss_MiB\":%.1f}}\n", sw, sr / 1024
}'
