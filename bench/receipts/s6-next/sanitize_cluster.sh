#!/usr/bin/env bash
# PREPARED, NOT RUN (no device time left in session 6): compute-sanitizer memcheck over the cluster attention (attn_lab quick: 1 column,
# positions 511 and 3967, the step's two launches and clusters of 8 and 16, bits compared).
set -u  # usage: bash sanitize_cluster.sh PATH/TO/attn_lab
date -u
timeout 70 compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 20 $1 1 quick 2>&1 | tail -15
echo "memcheck rc=${PIPESTATUS[0]} t=$SECONDS"
