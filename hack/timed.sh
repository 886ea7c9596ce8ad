#!/usr/bin/env bash
# Times the phases of a long target (make demo) and prints where the time went.
#
#   hack/timed.sh FILE NAME CMD [ARG...]   run CMD, append "SECONDS<TAB>NAME" to FILE, exit with CMD's status
#   hack/timed.sh --table FILE             print FILE as a table with the total
set -uo pipefail

if [ "${1:-}" = --table ]; then
  [ -f "${2:?}" ] || exit 0
  awk -F '\t' '
    { printf "  %-34s %5d s\n", $2, $1; total += $1 }
    END { printf "  %-34s %5d s (%d min %d s)\n", "total", total, total / 60, total % 60 }' "$2"
  exit 0
fi

file=${1:?FILE}
name=${2:?NAME}
shift 2
start=$(date +%s)
"$@"
status=$?
printf '%d\t%s%s\n' "$(($(date +%s) - start))" "$name" "$([ $status -eq 0 ] || echo " (failed)")" >>"$file"
exit $status
