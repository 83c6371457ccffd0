#!/bin/bash
# Queue decodebench validate on NODES nodes and, once it ends however it ends, decodebench fleet
# over the reports. Prints the run directory (RUN_DIR) on standard output.
#
#   REPORT_DIR=/shared/decodebench NODES=16 GPUS_PER_NODE=8 \
#     VALIDATE_ARGS="--gpu h100-sxm --expect-count 8" deploy/slurm/submit.sh [sbatch options...]
#
# Extra arguments go to both sbatch calls (a partition, an account: -p gpu -A ops).
# WAIT=1 waits for the fleet job and exits with its status (0 pass/warn, 1 fail).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
: "${REPORT_DIR:?set REPORT_DIR to a directory that every node can write}"
NODES="${NODES:-1}"
gres=()
if [[ -n "${GPUS_PER_NODE:-}" ]]; then
  gres=(--gres="gpu:$GPUS_PER_NODE")
fi

validate_job=$(sbatch --parsable -N "$NODES" "${gres[@]}" --chdir="$REPORT_DIR" "$@" "$here/validate.sbatch")
validate_job="${validate_job%%;*}" # "id;cluster" on multi-cluster setups
export RUN_DIR="$REPORT_DIR/$validate_job"

echo "$RUN_DIR"
echo "validate job $validate_job; the reports, fleet verdict, plots and summary go to $RUN_DIR" >&2
if [[ "${WAIT:-0}" == 1 ]]; then
  # --wait: sbatch returns when the fleet job ends, with its exit status.
  sbatch --parsable --wait --dependency="afterany:$validate_job" --chdir="$REPORT_DIR" "$@" "$here/fleet.sbatch" >&2
else
  sbatch --parsable --dependency="afterany:$validate_job" --chdir="$REPORT_DIR" "$@" "$here/fleet.sbatch" >&2
fi
