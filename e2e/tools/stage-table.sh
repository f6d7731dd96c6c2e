#!/usr/bin/env bash
# Prints the stage timings `make test` collected (Makefile's `timed`: LANE, STAGE, SECONDS per
# line) as a table, lane by lane in the order the stages ran, with each lane's sum.
set -euo pipefail
file=${1:?usage: stage-table.sh STAGE_TIMES}
[ -s "$file" ] || { echo "no stage timings in $file"; exit 0; }
echo "==> stage timings"
awk -F'\t' '
  { lane[NR] = $1; stage[NR] = $2; secs[NR] = $3; if (!($1 in sum)) order[++lanes] = $1; sum[$1] += $3 }
  END {
    printf "  %-8s %-52s %8s\n", "lane", "stage", "seconds"
    for (l = 1; l <= lanes; l++) {
      name = order[l]
      for (i = 1; i <= NR; i++) if (lane[i] == name && stage[i] != "make test") printf "  %-8s %-52s %8d\n", name, stage[i], secs[i]
      if (name != "main") printf "  %-8s %-52s %8d\n", name, "(lane total)", sum[name]
    }
    for (i = 1; i <= NR; i++) if (stage[i] == "make test") printf "  %-8s %-52s %8d\n", "", "make test (wall clock)", secs[i]
  }' "$file"
