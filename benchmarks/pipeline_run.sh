#!/usr/bin/env bash
# Run one pipeline benchmark step, recording what the figure needs next to it: the exact
# command, the date, the load average before and after (the machine is shared), wall time and
# peak memory, then the step's own JSON summary. Usage:
#   benchmarks/pipeline_run.sh LOG -- kafka-rebalance pipeline rates -i ... -o ...
# Run it under `nice -n 10` and in the background on a shared machine; one heavy job at a time.
set -euo pipefail
log=$1
shift
[[ ${1:-} == "--" ]] && shift
{
  echo "# command: $*"
  echo "# start: $(date -u +%Y-%m-%dT%H:%M:%SZ)  load: $(cut -d' ' -f1-3 /proc/loadavg)"
} >>"$log"
# The 1-minute load every 15 s while the step runs; its mean goes next to the figure.
( while sleep 15; do cut -d' ' -f1 /proc/loadavg; done ) >"$log.load" &
sampler=$!
status=0
/usr/bin/time -f "# wall_s: %e  user_s: %U  sys_s: %S  max_rss_kb: %M" -a -o "$log" "$@" \
  >>"$log" 2>>"$log.stderr" || status=$?
kill "$sampler" 2>/dev/null || true
mean=$(awk '{s+=$1; n++; if (n==1 || $1<min) min=$1; if ($1>max) max=$1} END {if (n) printf "%.2f over %d samples (min %.2f, max %.2f)", s/n, n, min, max; else print "n/a"}' "$log.load")
echo "# load during run: mean 1-min load $mean" >>"$log"
echo "# end: $(date -u +%Y-%m-%dT%H:%M:%SZ)  load: $(cut -d' ' -f1-3 /proc/loadavg)  exit: $status" >>"$log"
exit "$status"
