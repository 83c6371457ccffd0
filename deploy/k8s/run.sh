#!/bin/bash
# Validate every GPU node of a Kubernetes cluster: apply the reports volume, run the validate
# Job (one pod per node, all its GPUs), wait for it, run the fleet Job over the reports and
# print the fleet verdict.
#
#   NODES=16 GPUS_PER_NODE=8 VALIDATE_ARGS="--gpu h100-sxm" deploy/k8s/run.sh
#
# Environment: NODES (default: the nodes labelled nvidia.com/gpu.present=true), GPUS_PER_NODE
# (8), RUN_ID (default: the date and time), BASELINE (an earlier RUN_ID), VALIDATE_ARGS, IMAGE
# (default decodebench:latest), KUBECTL (default kubectl; add -n NAMESPACE there).
# Exit status: the fleet's (0 pass or warn, 1 fail).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
kubectl=(${KUBECTL:-kubectl})
if [[ -z "${NODES:-}" ]]; then
  NODES=$("${kubectl[@]}" get nodes -l nvidia.com/gpu.present=true -o name | wc -l)
fi
GPUS_PER_NODE="${GPUS_PER_NODE:-8}"
RUN_ID="${RUN_ID:-$(date -u +%Y%m%d-%H%M%S)}"
IMAGE="${IMAGE:-decodebench:latest}"
echo "validating $NODES node(s) x $GPUS_PER_NODE GPU(s), run $RUN_ID" >&2

# Fill the marked fields of a manifest: each line ending in "# NAME" takes NAME's value.
fill() {
  sed -e "s|^\(\s*completions:\) [0-9]* # NODES|\1 $NODES # NODES|" \
    -e "s|^\(\s*parallelism:\) [0-9]* # NODES.*|\1 $NODES # NODES|" \
    -e "s|^\(\s*nvidia.com/gpu:\) [0-9]* # GPUS_PER_NODE.*|\1 $GPUS_PER_NODE # GPUS_PER_NODE|" \
    -e "s|^\(\s*value:\) \"[^\"]*\" # RUN_ID|\1 \"$RUN_ID\" # RUN_ID|" \
    -e "s|^\(\s*value:\) \"[^\"]*\" # GPUS_PER_NODE|\1 \"$GPUS_PER_NODE\" # GPUS_PER_NODE|" \
    -e "s|^\(\s*value:\) \"[^\"]*\" # NODES|\1 \"$NODES\" # NODES|" \
    -e "s|^\(\s*value:\) \"[^\"]*\" # e.g.*|\1 \"${VALIDATE_ARGS:-}\"|" \
    -e "s|^\(\s*value:\) \"[^\"]*\" # an earlier RUN_ID.*|\1 \"${BASELINE:-}\"|" \
    -e "s|image: decodebench:latest|image: $IMAGE|" "$1"
}

"${kubectl[@]}" apply -f "$here/reports-pvc.yaml"
"${kubectl[@]}" delete job decodebench-validate decodebench-fleet --ignore-not-found
fill "$here/validate-job.yaml" | "${kubectl[@]}" apply -f -
# Complete, or failed (a pod that could not be placed, a usage error): the fleet job tells.
"${kubectl[@]}" wait --for=condition=complete --timeout=25m job/decodebench-validate ||
  echo "the validate Job did not complete; the fleet names the nodes that did not report" >&2
fill "$here/fleet-job.yaml" | "${kubectl[@]}" apply -f -
"${kubectl[@]}" wait --for=condition=complete --timeout=10m job/decodebench-fleet || true
"${kubectl[@]}" logs job/decodebench-fleet
status=$("${kubectl[@]}" get job decodebench-fleet -o jsonpath='{.status.succeeded}')
[[ "$status" == 1 ]]
