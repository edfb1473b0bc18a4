#!/usr/bin/env bash
# timed.sh NAME CMD...: run CMD, then add its wall time to this run's rows
# of build/timings.tsv (RUN, NAME, SECONDS; RUN is the top-level make's
# SPLADE_RUN, set in the Makefile). scripts/run-tests.sh prints them.
set -euo pipefail
name=${1:?usage: timed.sh NAME CMD...}
shift
start=$SECONDS
"$@"
mkdir -p build
printf '%s\t%s\t%d\n' "${SPLADE_RUN:-manual}" "$name" $((SECONDS - start)) \
  >> build/timings.tsv
