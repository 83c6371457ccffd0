#!/usr/bin/env bash
# scripts/gpu-check.sh: the one GPU run of ../shared/gpu.md, under 8 minutes end to end.
#
#   1. the card, driver, nvcc and PyTorch versions;
#   2. rebuilds libdecodebench_cuda.so with this machine's nvcc into a separate folder (a compile
#      error is a finding: CI builds with CUDA 11.8), else falls back to the carried lib/;
#   3. `decodebench verify` on every kernel at several shapes on the card;
#   4. `decodebench bench probe all`, `bench linear` and `bench attention` at Llama-3-8B and
#      Llama-3-70B shapes, then scripts/peer_torch.py (PyTorch's cuBLAS matmul and SDPA, timed
#      the same way) on the same shapes;
#      then fp8 and int4 weights beside bf16 at the 8B shapes (quant.txt: time ratios, GB/s);
#   5. a short default sweep (report in the tarball) and `decodebench validate` (its verdict);
#   6. writes everything under $OUT (gpu-check.tar.gz plus the summary, the records and the log)
#      and prints the targets table of issues 3 and 4 LAST.
# Beside those: the static gate (bin/kernels-check, `make kernels-check`) on the sm_90 objects
# this machine's nvcc built, so its minimums can be set against what the card then measures;
# our linear kernels beside cuBLASLt in the same process (`bench linear --peer cublas`); and the
# empty kernel's launch-to-launch time that every run records in run.json.
#
# Every step runs under a timeout and its exit code is recorded; one failure never stops the
# rest (set -u, not -e). Steps are ordered by what the targets need most, and a step that would
# start with under 10 s of the time budget left is skipped and said so.
#
# Needs bin/decodebench and bin/kernels-check (`make build bin/kernels-check` here: Go is not on
# the GPU machine) and lib/ carried with them.
#
# GPU_CHECK_DRY=1: the same steps end to end on --backend emu with tiny shapes, no nvidia-smi,
# no nvcc, no torch: to know the script works before the precious GPU run. Its times are the
# emulator's and mean nothing.
#
# Environment: OUT (default: a new temporary folder), GPU_CHECK_BUDGET (seconds for the steps,
# default 450), DECODEBENCH_BIN (default bin/decodebench), KERNELS_CHECK_BIN (default
# bin/kernels-check), NVCC (default nvcc).
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
DRY=${GPU_CHECK_DRY:-0}
OUT=${OUT:-$(mktemp -d)}
RES="$OUT/gpu-check"
mkdir -p "$RES"
LOG="$RES/gpu-check.log"
STEPS="$RES/steps.tsv"
: >"$LOG"
printf 'step\texit\tseconds\n' >"$STEPS"
START=$(date +%s)
BUDGET=${GPU_CHECK_BUDGET:-450}
BIN=${DECODEBENCH_BIN:-$ROOT/bin/decodebench}
NVCC=${NVCC:-nvcc}
GATE=${KERNELS_CHECK_BIN:-$ROOT/bin/kernels-check}
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1

log() { echo "$*" | tee -a "$LOG"; }
elapsed() { echo $(($(date +%s) - START)); }

# record NAME EXIT SECONDS
record() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$STEPS"; }

# step NAME LIMIT_S CMD...: runs CMD under a timeout (never past the budget), its output to the
# terminal and the log, and records its exit code (124: timed out; "skipped": no time left).
step() {
	local name=$1 limit=$2
	shift 2
	local left=$((BUDGET - $(elapsed)))
	if ((left < 10)); then
		log "=== $name: SKIPPED, ${left}s of the ${BUDGET}s budget left"
		record "$name" skipped 0
		return
	fi
	((limit > left)) && limit=$left
	log "=== $name (limit ${limit}s, at $(elapsed)s): $*"
	local t0 rc
	t0=$(date +%s)
	timeout --kill-after=5 "$limit" "$@" 2>&1 | tee -a "$LOG"
	rc=${PIPESTATUS[0]}
	record "$name" "$rc" $(($(date +%s) - t0))
	((rc != 0)) && log "=== $name: exit $rc"
	return 0
}

# ---- 1. the machine -------------------------------------------------------------------------
log "gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ), dry=$DRY, results in $RES"
log "git: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?') $(git -C "$ROOT" status --porcelain 2>/dev/null | wc -l | tr -d ' ') changed file(s)"
if [ "$DRY" = 1 ]; then
	BACKEND=emu
	log "DRY RUN: --backend emu, tiny shapes; no nvidia-smi, nvcc or torch; times are the emulator's and mean nothing"
else
	BACKEND=cuda
	step "nvidia-smi -L" 20 nvidia-smi -L
	step "nvidia-smi query" 20 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit,temperature.gpu --format=csv
	step "nvcc --version" 20 "$NVCC" --version
	step "torch version" 60 "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))'
	step "decodebench info" 30 "$BIN" info
fi
if [ ! -x "$BIN" ]; then
	log "NO BINARY at $BIN: build it with \`make build\` where Go is and carry bin/"
elif ! "$BIN" bench --help >/dev/null 2>&1; then
	log "$BIN has no bench command: register benchCommand() in cmd/decodebench/main.go and rebuild bin/"
fi

# kernels_check PTXAS_LOG LIBRARY OBJECTS...: the static gate's table into the log and
# kernels-check.txt (printed again at the end), its JSON into kernels-check.json.
kernels_check() {
	local ptxas=$1 library=$2
	shift 2
	if [ ! -x "$GATE" ]; then
		log "=== kernels-check: NO BINARY at $GATE: build it with \`make bin/kernels-check\` where Go is and carry bin/"
		record "kernels-check" skipped 0
		return
	fi
	[ -f "$library" ] || library=none
	# cuobjdump takes most of it: about 20 s of CPU for the attention object.
	step "kernels-check" 150 bash -c '"$@" 2>&1 | tee "$0"; exit "${PIPESTATUS[0]}"' "$RES/kernels-check.txt" \
		"$GATE" -manifest kernels/perf-manifest.json -ptxas "$ptxas" -json "$RES/kernels-check.json" -library "$library" "$@"
}

# ---- 2. the kernels library -------------------------------------------------------------------
KERNELS_DIR="$ROOT/lib"
LIB_SOURCE="carried lib/ (built with the CI machine's nvcc)"
build_kernels() { # builds into $1 with this machine's nvcc: make if there is one, else nvcc itself
	local lib=$1 build=$2
	mkdir -p "$lib" "$build"
	if command -v make >/dev/null; then
		make -j"$(nproc)" kernels NVCC="$NVCC" LIBDIR="$lib" KERNELS_BUILD="$build"
		return
	fi
	echo "no make: running nvcc directly with kernels/kernels.mk's flags"
	local gencode="-gencode arch=compute_80,code=sm_80 -gencode arch=compute_86,code=sm_86 -gencode arch=compute_89,code=sm_89 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90"
	local objs=() f o
	for f in kernels/*.cu; do
		o="$build/$(basename "${f%.cu}").o"
		# shellcheck disable=SC2086
		"$NVCC" -O3 -std=c++17 $gencode -Werror all-warnings -Xcompiler -fPIC,-Wall,-Wextra,-Werror -Xptxas -v -c "$f" -o "$o" >"${o%.o}.ptxas.log" 2>&1
		local rc=$?
		cat "${o%.o}.ptxas.log"
		((rc != 0)) && return $rc
		objs+=("$o")
	done
	cat "$build"/*.ptxas.log >"$build/kernels-ptxas.log"
	sh kernels/check-spills.sh "$build/kernels-ptxas.log" || return
	"$NVCC" -shared -cudart static -o "$lib/libdecodebench_cuda.so" "${objs[@]}" -Xlinker --version-script=kernels/exports.map
}
export -f build_kernels
export NVCC
if [ "$DRY" = 1 ]; then
	log "=== rebuild of the kernels: skipped (dry run); using lib/"
	if [ -f build/kernels-ptxas.log ] && [ -e build/cuda/linear.o ]; then
		kernels_check build/kernels-ptxas.log "$ROOT/lib/libdecodebench_emu.so" build/cuda/*.o
	else
		log "=== kernels-check: skipped (dry run without build/cuda: run \`make kernels\` first)"
		record "kernels-check" skipped 0
	fi
else
	GPU_LIB="$RES/kernels-here/lib"
	GPU_BUILD="${TMPDIR:-/tmp}/gpu-check-build"
	step "rebuild kernels with this nvcc" 200 bash -c "build_kernels '$GPU_LIB' '$GPU_BUILD'"
	cp "$GPU_BUILD"/kernels-ptxas.log "$RES/" 2>/dev/null
	if [ -f "$GPU_LIB/libdecodebench_cuda.so" ] && [ "$(tail -n1 "$STEPS" | cut -f2)" = 0 ]; then
		KERNELS_DIR="$GPU_LIB"
		LIB_SOURCE="rebuilt here with $("$NVCC" --version | tail -n1)"
	else
		log "REBUILD FAILED (a finding: see the log above); falling back to the carried lib/"
	fi
	# The static gate on the objects this nvcc built (make puts them in cuda/, the fallback
	# beside the log); its waves are planned by the rebuilt library, which sees the card's SMs.
	GATE_OBJS=("$GPU_BUILD"/cuda/*.o)
	[ -e "${GATE_OBJS[0]}" ] || GATE_OBJS=("$GPU_BUILD"/*.o)
	if [ -e "${GATE_OBJS[0]}" ]; then
		kernels_check "$GPU_BUILD/kernels-ptxas.log" "$GPU_LIB/libdecodebench_cuda.so" "${GATE_OBJS[@]}"
	else
		log "=== kernels-check: no objects built here, so no gate on this nvcc's SASS"
		record "kernels-check" skipped 0
	fi
	rm -rf "$GPU_BUILD"
fi
export DECODEBENCH_KERNELS="$KERNELS_DIR"
# The cublas variant dlopens libcublasLt: where the loader does not know one, offer the
# toolkit's and PyTorch's.
if [ "$DRY" != 1 ] && ! ldconfig -p 2>/dev/null | grep -q libcublasLt; then
	for d in "$(dirname "$(command -v "$NVCC" 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")/../lib64" \
		"$("$PY" -c 'import os, nvidia.cublas as c; print(os.path.join(list(c.__path__)[0], "lib"))' 2>/dev/null)"; do
		if [ -n "$d" ] && ls "$d"/libcublasLt.so* >/dev/null 2>&1; then
			export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
			log "libcublasLt for the cublas variant: $d"
			break
		fi
	done
fi
log "kernels library: $LIB_SOURCE ($KERNELS_DIR)"

# ---- 3. verify on the card --------------------------------------------------------------------
V=("$BIN" verify)
if [ "$DRY" = 1 ]; then
	LINEAR_SHAPES="1:1:64 1:40:64 7:40:64 16:8:32:fp16 3:24:64:bf16:gemv:2 9:24:64:bf16:mma"
	ATTENTION_SHAPES=(
		"--batch 1 --q-heads 4 --kv-heads 2 --head-dim 64 --context 40"
		"--batch 3 --q-heads 4 --kv-heads 1 --head-dim 128 --context 1,33,70 --page-size 16 --append"
		"--batch 2 --q-heads 7 --kv-heads 1 --head-dim 80 --context 50 --splits 3 --dtype fp16"
		"--batch 3 --q-heads 16 --kv-heads 1 --head-dim 256 --context 1,33,70 --page-size 16 --append --variant mma"
	)
	PROBE_WORDS=4096
else
	# batch:n:k[:dtype[:variant[:split_k]]]. The whole float64 reference runs for each: n 128256
	# stops at batch 16 (batch 256 would be 134G multiply-adds); bench verifies every timed shape.
	LINEAR_SHAPES=""
	for b in 1 7 16 64 256; do for n in 1 4096 14336; do LINEAR_SHAPES+=" $b:$n:4096"; done; done
	LINEAR_SHAPES+=" 1:128256:4096 7:128256:4096 16:128256:4096 4:1024:14336:bf16:gemv:8 64:4096:4096:fp16 33:6144:4096:bf16:mma 8:4096:4096:bf16:gemv"
	ATTENTION_SHAPES=(
		"--batch 1 --q-heads 32 --kv-heads 8 --head-dim 128 --context 8192"
		"--batch 4 --q-heads 32 --kv-heads 8 --head-dim 128 --context 1,100,4097,30000 --page-size 16 --append"
		"--batch 16 --q-heads 64 --kv-heads 8 --head-dim 128 --context 2048 --page-size 256"
		"--batch 256 --q-heads 32 --kv-heads 8 --head-dim 128 --context 128"
		"--batch 3 --q-heads 28 --kv-heads 4 --head-dim 128 --context 1000 --dtype fp16"
		"--batch 2 --q-heads 16 --kv-heads 16 --head-dim 64 --context 5000 --splits 7"
		"--batch 2 --q-heads 8 --kv-heads 1 --head-dim 256 --context 3000"
		"--batch 3 --q-heads 10 --kv-heads 2 --head-dim 80 --context 777,5,1500"
		"--batch 2 --q-heads 12 --kv-heads 4 --head-dim 96 --context 2000 --page-size 32"
		# the tensor-core kernel on the card before its timings are compared (bench verifies too)
		"--batch 4 --q-heads 64 --kv-heads 8 --head-dim 128 --context 1,100,4097,20000 --page-size 16 --append --variant mma"
	)
	PROBE_WORDS=16777216
fi
for shape in $LINEAR_SHAPES; do
	IFS=: read -r b n k dt variant splitk <<<"$shape"
	step "verify linear b$b n$n k$k ${dt:-bf16} ${variant:-auto} ${splitk:-}" 90 \
		"${V[@]}" linear --backend "$BACKEND" --batch "$b" --n "$n" --k "$k" --dtype "${dt:-bf16}" --variant "${variant:-auto}" --split-k "${splitk:-0}"
done
step "verify probe all" 120 "${V[@]}" probe all --backend "$BACKEND" --words "$PROBE_WORDS"
for args in "${ATTENTION_SHAPES[@]}"; do
	# shellcheck disable=SC2086
	step "verify attention $args" 120 "${V[@]}" attention --backend "$BACKEND" $args
done
# the small ops of a step: cheap at real sizes, so a dry run checks the same list
SMALLOP_SHAPES=(
	"embedding --vocab 128256 --hidden 4096 --batch 16"
	"rmsnorm --residual --hidden 4096 --batch 7"
	"rmsnorm --unit-offset --hidden 3584 --batch 1 --dtype fp16"
	"rope --rope llama3 --q-heads 32 --kv-heads 8 --head-dim 128 --position 20000 --batch 2"
	"rope --rope dynamic --q-heads 32 --kv-heads 32 --head-dim 80 --rotary-dim 20 --position 3000 --dtype fp16"
	"act --hidden 14336 --batch 17"
	"act --activation gelu_tanh --hidden 14336 --batch 3 --dtype fp16"
	"bias --hidden 4104 --batch 7"
	"argmax --vocab 151936 --batch 17"
	"moe --experts 128 --top-k 8 --renormalize --hidden 2048 --batch 64"
	"moe --experts 8 --top-k 2 --topk-first --hidden 4096 --batch 7"
)
for args in "${SMALLOP_SHAPES[@]}"; do
	# shellcheck disable=SC2086
	step "verify smallop $args" 60 "${V[@]}" smallop $args --backend "$BACKEND"
done

# ---- 4. bench, then the peer ------------------------------------------------------------------
B=("$BIN" bench)
if [ "$DRY" = 1 ]; then
	TIMING=(--warmup 1 --min-samples 3 --min-time 0s --max-time 500ms --target-spread 0.05)
	cat >"$RES/tiny-llama.json" <<'EOF'
{"model_type": "llama", "hidden_size": 128, "intermediate_size": 96, "num_hidden_layers": 2,
 "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 64, "vocab_size": 200, "torch_dtype": "bfloat16"}
EOF
	MODEL_8B=(--model-config "$RES/tiny-llama.json")
	MODEL_70B=(--model-config "$RES/tiny-llama.json")
	LINEAR_BATCHES=1,2,16
	ATT_BATCHES=1,2
	ATT_CONTEXTS=64,256
	MMA_BATCHES=1,2
	MMA_CONTEXTS=64,256
	PROBE_BYTES=(--bytes 65536)
	MHA=(--q-heads 4 --kv-heads 4 --head-dim 64 --batch 1 --context 64)
else
	# A shorter sampling rule than timing.Default's (0.5 s, 0.5%, 10 s) so that ~200 shapes fit the
	# budget; every record says the rule it was taken with.
	TIMING=(--warmup 2 --min-samples 10 --min-time 150ms --max-time 600ms --target-spread 0.01)
	MODEL_8B=(--model llama3-8b)
	MODEL_70B=(--model llama3-70b)
	LINEAR_BATCHES=1-256*2
	ATT_BATCHES=1,4,16,64,256
	ATT_CONTEXTS=1k,8k,32k,128k
	MMA_BATCHES=1,16,64 # a subset of ATT_*: each mma record has its default (simt) twin
	MMA_CONTEXTS=8k,32k
	PROBE_BYTES=()
	# multi-head at the KV bytes of the GQA runs (4x the heads of Llama-3-8B's 8): GQA vs MHA
	MHA=(--q-heads 32 --kv-heads 32 --head-dim 128 --batch 1,4 --context 8k,32k)
fi
export PEER_MIN_SECONDS=0.15 PEER_MAX_SECONDS=0.6 PEER_TARGET_SPREAD=0.01

step "bench probe all" 120 "${B[@]}" probe all --backend "$BACKEND" "${PROBE_BYTES[@]}" "${TIMING[@]}" --out "$RES/probe.jsonl"
CEILING=$("$PY" -c 'import json,sys
best=0
for l in open(sys.argv[1]):
    r=json.loads(l)
    if r.get("probe")=="read" and r.get("status")=="ok": best=max(best,r["achieved_gbps"])
print(best)' "$RES/probe.jsonl" 2>/dev/null || echo 0)
CEIL=()
if [ "${CEILING%%.*}" != 0 ] && [ -n "$CEILING" ]; then
	CEIL=(--read-ceiling-gbps "$CEILING")
	log "read ceiling for the linear and attention runs: $CEILING GB/s (bench probe read, this run)"
fi

bench_model() { # TAG MODEL_ARGS...: linear and attention at the model's shapes
	local tag=$1
	shift
	step "bench linear $tag" 150 "${B[@]}" linear --backend "$BACKEND" "$@" --batch "$LINEAR_BATCHES" "${CEIL[@]}" "${TIMING[@]}" --out "$RES/linear-$tag.jsonl"
	# Shapes whose KV cache passes 60 GB are skipped (the H200 holds 141 GB; time, too).
	step "bench attention $tag" 120 "${B[@]}" attention --backend "$BACKEND" "$@" --batch "$ATT_BATCHES" --context "$ATT_CONTEXTS" \
		--max-gb 60 "${CEIL[@]}" "${TIMING[@]}" --out "$RES/attention-$tag.jsonl"
}
peer() { # TAG: PyTorch on the shapes of that tag
	local tag=$1
	if [ "$DRY" = 1 ]; then
		log "=== peer $tag: skipped (dry run: no torch)"
		record "peer $tag" skipped 0
		return
	fi
	cat "$RES/linear-$tag.jsonl" "$RES/attention-$tag.jsonl" 2>/dev/null >"$RES/for-peer-$tag.jsonl"
	step "peer torch $tag" 150 "$PY" scripts/peer_torch.py "$RES/for-peer-$tag.jsonl" "$RES/peer.jsonl"
	rm -f "$RES/for-peer-$tag.jsonl"
}

# Most needed first: the 8B shapes and their peer, a short default sweep and validate (issues 5
# and 6), then 70B, then GQA vs MHA.
# cuBLASLt (DB_LINEAR_CUBLAS) beside our linear kernels in the same process, timed the same way.
cublas_peer() { # TAG MODEL_ARGS...
	local tag=$1
	shift
	if "$BIN" bench linear --help 2>&1 | grep -q -- '--peer'; then
		step "bench linear --peer cublas $tag" 90 "${B[@]}" linear --backend "$BACKEND" "$@" --batch "$PEER_BATCHES" \
			--peer cublas "${CEIL[@]}" "${TIMING[@]}" --out "$RES/cublas-peer-$tag.jsonl"
	else
		log "=== bench linear --peer cublas $tag: this decodebench has no --peer flag yet; timing --variant cublas on its own instead"
		step "bench linear --variant cublas $tag" 90 "${B[@]}" linear --backend "$BACKEND" "$@" --batch "$PEER_BATCHES" \
			--variant cublas "${CEIL[@]}" "${TIMING[@]}" --out "$RES/cublas-peer-$tag.jsonl"
	fi
}
if [ "$DRY" = 1 ]; then PEER_BATCHES=1,2; else PEER_BATCHES=1,16,64,256; fi

bench_model 8b "${MODEL_8B[@]}"
# Quantized weights (issue 13): fp8 (per channel) and int4 (GPTQ-style, g128) at the 8B shapes,
# batch 1 (the GEMV) and 16 (the tensor-core kernel), beside bf16's records of linear-8b.jsonl;
# quant.txt gives the time ratios and the share of the read ceiling, each format's own bytes.
QUANT_BATCHES=1,16
for fmt in fp8 int4; do
	step "bench linear 8b --weight-dtype $fmt" 45 "${B[@]}" linear --backend "$BACKEND" "${MODEL_8B[@]}" --weight-dtype "$fmt" \
		--batch "$QUANT_BATCHES" "${CEIL[@]}" "${TIMING[@]}" --out "$RES/quant-$fmt-8b.jsonl"
done
cat "$RES"/quant-*-8b.jsonl 2>/dev/null | "$PY" -c 'import json,sys
dense, quant = {}, []
for l in open(sys.argv[1]) if len(sys.argv) > 1 else []:
    r = json.loads(l)
    if r.get("kind") == "linear" and r.get("status") == "ok" and not r.get("weight_format"):
        dense[(r["kernel"], r["batch"])] = r
for l in sys.stdin:
    r = json.loads(l)
    if r.get("kind") == "linear" and r.get("status") == "ok" and r.get("weight_format"):
        quant.append(r)
bars = {"fp8": 0.55, "int4": 0.32}
print("quantized linears vs bf16 (Llama-3-8B shapes): time ratio (bar at batch 1: fp8 <= 0.55, int4 <= 0.32),")
print("GB/s and share of the read ceiling counting the bytes of each format (bar at batch 1: >= 88%)")
for r in sorted(quant, key=lambda r: (r["weight_format"], r["batch"], r["kernel"])):
    d = dense.get((r["kernel"], r["batch"]))
    ratio = r["median_seconds"] / d["median_seconds"] if d else None
    frac = r.get("fraction_of_read_ceiling")
    bar = bars.get(r["weight_format"])
    verdict = ""
    if r["batch"] == 1 and ratio is not None and frac:
        verdict = "ok" if ratio <= bar and frac >= 0.88 else "MISS"
    print("  %-6s %-12s B=%-3d N=%-6d K=%-6d %-6s ratio %s  %8.1f GB/s  %s  %s" % (
        r["weight_format"], r["kernel"], r["batch"], r["n"], r["k"], r.get("variant", "?"),
        "%.3f" % ratio if ratio is not None else "  -  ", r.get("achieved_gbps", 0),
        "%5.1f%%" % (100 * frac) if frac else "    -", verdict))
if not quant: print("  no quantized records (see the log)")
' "$RES/linear-8b.jsonl" >"$RES/quant.txt" 2>&1 || echo "quantized comparison failed" >>"$RES/quant.txt"
cat "$RES/quant.txt" | tee -a "$LOG"
cublas_peer 8b "${MODEL_8B[@]}"
peer 8b
if [ "$DRY" = 1 ]; then
	SWEEP_MODEL=(--hidden 128 --ffn 256 --heads 2 --kv-heads 1 --head-dim 64 --layers 2 --vocab 512)
	SWEEP_AXES=(--batch 1,4 --context 64,256 --min-samples 3 --min-time 10ms --max-time 100ms)
	VALIDATE_EXTRA=(--suite tiny --simulate-gpus 1)
else
	SWEEP_MODEL=(--model llama3-8b)
	SWEEP_AXES=(--batch 1,8,64,256 --context 1k,8k,32k --budget 75s)
	VALIDATE_EXTRA=()
fi
step "sweep llama3-8b" 100 "$BIN" sweep --backend "$BACKEND" "${SWEEP_MODEL[@]}" "${SWEEP_AXES[@]}" \
	--progress lines --out "$RES/sweep"
step "validate" 150 "$BIN" validate --backend "$BACKEND" "${VALIDATE_EXTRA[@]}" --out "$RES/validate.json"
bench_model 70b "${MODEL_70B[@]}"
cublas_peer 70b "${MODEL_70B[@]}"
# The tensor-core attention kernel (--variant mma) at the 8B and 70B layouts, next to the default
# (simt) records above: not yet measured on a card; auto stays simt until this comparison says
# otherwise. Into variant-mma.jsonl, not attention-*.jsonl, so the targets table stays the default's.
step "bench attention --variant mma (8b, 70b)" 60 env M8="${MODEL_8B[*]}" M70="${MODEL_70B[*]}" OUTFILE="$RES/variant-mma.jsonl" \
	bash -c '"$@" $M8 --out "$OUTFILE"; a=$?; "$@" $M70 --out "$OUTFILE"; b=$?; exit $((a > b ? a : b))' _ \
	"${B[@]}" attention --backend "$BACKEND" --variant mma --batch "$MMA_BATCHES" --context "$MMA_CONTEXTS" \
	--max-gb 60 "${CEIL[@]}" "${TIMING[@]}"
step "bench attention mha" 60 "${B[@]}" attention --backend "$BACKEND" "${MHA[@]}" "${CEIL[@]}" "${TIMING[@]}" --out "$RES/attention-mha.jsonl"
peer 70b
if [ "$DRY" != 1 ]; then # did the card hold its clocks? (the records do not say yet)
	step "clocks after" 20 bash -c 'q=clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw
		nvidia-smi --query-gpu=$q,clocks_event_reasons.active --format=csv 2>/dev/null ||
			nvidia-smi --query-gpu=$q,clocks_throttle_reasons.active --format=csv'
fi

# ---- 5. results -------------------------------------------------------------------------------
# The launch baseline: db_empty_kernel's launch-to-launch time, which every run records in its
# run.json (any key naming "launch").
"$PY" -c 'import glob,json,sys
found = []
def walk(o, path):
    items = o.items() if isinstance(o, dict) else enumerate(o) if isinstance(o, list) else []
    for k, v in items:
        if isinstance(v, (dict, list)):
            walk(v, path + [str(k)])
        elif "launch" in str(k).lower():
            found.append((".".join(path + [str(k)]), v))
for f in sorted(glob.glob(sys.argv[1] + "/**/run.json", recursive=True)):
    walk(json.load(open(f)), [f.split("/gpu-check/")[-1]])
print("launch baseline (empty kernel, launch to launch):")
for k, v in found: print("  %s = %s" % (k, v))
if not found: print("  not recorded: no run.json here has a launch field (did the sweep or bench step fail? see the log)")
' "$RES" >"$RES/launch-baseline.txt" 2>&1 || echo "launch baseline: run.json unreadable" >"$RES/launch-baseline.txt"
cat "$RES/launch-baseline.txt" | tee -a "$LOG"
[ -f "$RES/kernels-check.txt" ] || echo "kernels-check: not run (see the log)" >"$RES/kernels-check.txt"

cat "$RES"/probe.jsonl "$RES"/linear-*.jsonl "$RES"/attention-*.jsonl "$RES"/quant-*.jsonl 2>/dev/null >"$RES/all.jsonl"
touch "$RES/peer.jsonl"
"$PY" scripts/peer_torch.py --summary "$RES/all.jsonl" "$RES/peer.jsonl" >"$RES/summary.txt" 2>&1 || echo "summary failed" >>"$RES/summary.txt"
# simt vs mma attention, shape by shape: the evidence for DB_ATTENTION_AUTO's choice.
cat "$RES"/attention-8b.jsonl "$RES"/attention-70b.jsonl 2>/dev/null | "$PY" -c 'import json,os,sys
def load(lines):
    out = {}
    for l in lines:
        r = json.loads(l)
        if r.get("kind") == "attention" and r.get("status") == "ok":
            out[(r.get("model"), r["batch"], r["context"], r.get("page_size", 0))] = r
    return out
simt, mma = load(sys.stdin), load(open(sys.argv[1]) if os.path.exists(sys.argv[1]) else [])
print("attention kernels, simt (default) vs mma; % of the read ceiling, time ratio mma/simt (< 1: mma faster)")
for k in sorted(mma, key=str):
    if k in simt:
        s, m = simt[k], mma[k]
        f = lambda r: "%5.1f%%" % (100 * r["fraction_of_read_ceiling"]) if r.get("fraction_of_read_ceiling") else "    -"
        print("  %-12s B=%-3d S=%-6d simt %s  mma %s  mma/simt %.2f" % (k[0], k[1], k[2], f(s), f(m), m["median_seconds"] / s["median_seconds"]))
' "$RES/variant-mma.jsonl" >"$RES/variants.txt" 2>&1 || echo "variant comparison failed" >>"$RES/variants.txt"
{
	echo "gpu-check: $(elapsed)s of a ${BUDGET}s budget; kernels library: $LIB_SOURCE"
	awk -F'\t' 'NR > 1 && $2 != "0" { bad++; print "  step " ($2 == "skipped" ? "SKIPPED" : "FAILED (exit " $2 ")") ": " $1 }
		NR > 1 { n++ } END { printf "%d steps, %d not ok\n", n, bad }' "$STEPS"
} >"$RES/steps-summary.txt"
tar czf "$OUT/gpu-check.tar.gz" -C "$OUT" gpu-check
[ -f "$RES/quant.txt" ] || echo "quantized comparison: not run (see the log)" >"$RES/quant.txt"
cp "$RES/summary.txt" "$RES/steps-summary.txt" "$RES/variants.txt" "$RES/quant.txt" "$RES/all.jsonl" "$RES/peer.jsonl" "$LOG" \
	"$RES/kernels-check.txt" "$RES/launch-baseline.txt" "$OUT/"
[ -f "$RES/validate.json" ] && cp "$RES/validate.json" "$OUT/"
[ -f "$RES/kernels-check.json" ] && cp "$RES/kernels-check.json" "$OUT/"
rm -rf "$RES"
echo
if [ -f "$OUT/validate.json" ]; then
	"$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); print("validate verdict:", r.get("verdict") or r.get("overall"))' "$OUT/validate.json" 2>/dev/null
fi
cat "$OUT/steps-summary.txt"
echo
cat "$OUT/kernels-check.txt"
echo
cat "$OUT/launch-baseline.txt"
echo
cat "$OUT/variants.txt"
echo
cat "$OUT/quant.txt"
echo
cat "$OUT/summary.txt"

# ---- 7. whole decode steps (issue 11): Llama-3-8B at batch 1 and 16 ---------------------------
# Its own block after the rest, under its own time limit (the budget above is spent by now):
# `decodebench step` runs the probes, the kernels alone (composed) and the whole step eager and
# as a CUDA graph, 32 steps a sample from context 1024. The table goes to the terminal and
# step-8b.txt; the records (steps.jsonl with the other run files) to $OUT/step-8b/.
# Target (issue 11): graph-mode batch 1 at >= 85% of the bound on the measured ceiling, about
# 270 tokens/s per request on an H200.
STEP_LIMIT=${GPU_CHECK_STEP_LIMIT:-240}
if [ "$DRY" = 1 ]; then
	STEP_MODEL=(--model-config "$ROOT/cmd/decodebench/testdata/tiny-llama.json")
	STEP_SHAPE=(--batch 1,16 --context 64 --steps 4)
else
	STEP_MODEL=(--model llama3-8b)
	STEP_SHAPE=(--batch 1,16 --context 1k --steps 32)
fi
echo "=== step: Llama-3-8B whole decode steps (limit ${STEP_LIMIT}s)" | tee "$OUT/step-8b.txt"
rm -rf "$OUT/step-8b"
timeout --kill-after=5 "$STEP_LIMIT" "$BIN" step --backend "$BACKEND" "${STEP_MODEL[@]}" "${STEP_SHAPE[@]}" --out "$OUT/step-8b" 2>&1 | tee -a "$OUT/step-8b.txt"
echo "=== step: exit ${PIPESTATUS[0]}" | tee -a "$OUT/step-8b.txt"
