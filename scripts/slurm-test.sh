#!/bin/bash
# Runs the Slurm recipe (deploy/slurm) for real on a one-node Slurm cluster started here: Debian's
# slurm-wlm and munge, a slurm.conf for this host, munged, slurmctld and slurmd as root in the
# background. It submits deploy/slurm/submit.sh with the emulated backend, the tiny suite and
# simulated NVML GPUs (no GPU needed), waits for the fleet job, checks the report, the fleet
# verdict and the plots, and tears everything down. Needs root (CI's container is).
#
#   scripts/slurm-test.sh          # installs slurm-wlm and munge if missing
#   KEEP=1 scripts/slurm-test.sh   # keep the work directory for a look
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
start=$(date +%s)
export PATH="$PATH:/usr/local/go/bin"

say() { echo "slurm-test: $*" >&2; }
fail() { say "FAIL: $*"; exit 1; }

[[ $(id -u) == 0 ]] || fail "run as root: slurmd and munged are started here"
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  say "installing slurm-wlm and munge"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null
fi

work="$(mktemp -d /tmp/decodebench-slurm.XXXXXX)"
pids=()
teardown() {
  local rc=$?
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  if [[ $rc != 0 ]]; then
    for log in "$work"/log/*.log "$work"/reports/*.out "$work"/reports/*/*.txt; do
      [[ -f "$log" ]] && { echo "==== $log"; tail -n 40 "$log"; } >&2
    done
  fi
  if [[ "${KEEP:-0}" == 1 ]]; then say "kept $work"; else rm -rf "$work"; fi
  say "$( ((rc == 0)) && echo PASS || echo FAIL) in $(($(date +%s) - start)) s"
}
trap teardown EXIT

# ---- the binary and the emulator library -------------------------------------------------------
# DECODEBENCH=path uses a binary built elsewhere instead of building one.
make -s emu >/dev/null
if [[ -z "${DECODEBENCH:-}" ]]; then
  say "building decodebench"
  go build -o "$work/bin/decodebench" ./cmd/decodebench
  DECODEBENCH="$work/bin/decodebench"
fi
"$DECODEBENCH" fleet --help >/dev/null 2>&1 || fail "$DECODEBENCH has no fleet command (is it registered in cmd/decodebench/main.go?)"
export DECODEBENCH DECODEBENCH_KERNELS="$repo/lib/libdecodebench_emu.so"

# ---- munge ------------------------------------------------------------------------------------------
mkdir -p "$work/munge" "$work/log" "$work/spool/ctld" "$work/spool/d" "$work/reports"
if [[ ! -s /etc/munge/munge.key ]]; then
  say "creating a munge key"
  mungekey --create --keyfile=/etc/munge/munge.key 2>/dev/null || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
chown root:root /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
munge_socket="$work/munge/munge.socket"
munged --foreground --force --socket="$munge_socket" --key-file=/etc/munge/munge.key \
  --pid-file="$work/munge/munged.pid" --log-file="$work/log/munged.log" --seed-file="$work/munge/seed" &
pids+=($!)

# ---- a one-node cluster on this host -------------------------------------------------------------
host="$(hostname -s)"
cpus="$(nproc)"
mem_mb=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))
port=$(( 20000 + RANDOM % 20000 )) # away from a real Slurm's 6817/6818
export SLURM_CONF="$work/slurm.conf"
cat >"$SLURM_CONF" <<CONF
ClusterName=decodebench-test
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$munge_socket
CredType=cred/munge
SlurmctldPort=$port
SlurmdPort=$((port + 1))
StateSaveLocation=$work/spool/ctld
SlurmdSpoolDir=$work/spool/d
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SchedulerType=sched/backfill
SlurmdTimeout=60
InactiveLimit=0
MinJobAge=300
NodeName=$host CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF

for _ in $(seq 50); do [[ -S "$munge_socket" ]] && break; sleep 0.1; done
[[ -S "$munge_socket" ]] || fail "munged did not start"
slurmctld -D -f "$SLURM_CONF" >>"$work/log/slurmctld.out.log" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" >>"$work/log/slurmd.out.log" 2>&1 &
pids+=($!)
say "waiting for node $host"
for _ in $(seq 100); do
  state="$(sinfo -h -n "$host" -o %T 2>/dev/null || true)"
  [[ "$state" == idle* ]] && break
  sleep 0.2
done
[[ "$state" == idle* ]] || fail "node $host is '${state:-unknown}', not idle"
say "cluster up after $(($(date +%s) - start)) s"

# ---- the recipe ---------------------------------------------------------------------------------
export REPORT_DIR="$work/reports" NODES=1 WAIT=1
export VALIDATE_ARGS="--backend emu --suite tiny --simulate-gpus 2 --expect h100-sxm --expect-count 2 --idle-wait 1s"
set +e
run_dir="$(deploy/slurm/submit.sh)"
fleet_rc=$?
set -e
say "fleet job exit status $fleet_rc, run directory $run_dir"

# ---- what it left -------------------------------------------------------------------------------
report="$run_dir/$host.json"
[[ -s "$report" ]] || fail "no report at $report"
[[ "$(cat "$run_dir/hosts")" == "$host" ]] || fail "hosts file: $(cat "$run_dir/hosts")"
python3 - "$report" <<'PY' || fail "the report is not what the emulated tiny suite gives"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["schema"] == "decodebench.validate/v1", r["schema"]
assert r["emulated"] and r["backend"] == "emu" and r["suite"] == "tiny", (r["emulated"], r["backend"], r["suite"])
assert r["verdict"] == "PASS" and r["counts"]["skip"] > 0, (r["verdict"], r["counts"])  # speed gates SKIP on the emulator
assert len(r["cards"]) == 2 and all(c["uuid"] and c["pci_bus_id"] for c in r["cards"])
PY
grep -q "fleet verdict: WARN" "$run_dir/fleet.txt" || fail "fleet did not give WARN: $(tail -5 "$run_dir/fleet.txt")"
[[ $fleet_rc == 0 ]] || fail "the fleet job exited $fleet_rc"
[[ -s "$run_dir/fleet-summary.json" ]] || fail "no fleet summary"
[[ -s "$run_dir/fleet/fleet-read_bandwidth.png" && -s "$run_dir/fleet/fleet-read_bandwidth.svg" ]] || fail "no plots in $run_dir/fleet"
sacct_state="$(squeue -h 2>/dev/null | wc -l)"
[[ "$sacct_state" == 0 ]] || fail "jobs still queued"
say "report $report: PASS, speed gates SKIP (emulated); fleet: WARN (emulated); plots and summary written"
