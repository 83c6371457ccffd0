# kernels/kernels.mk: builds the two kernels libraries from the same sources. Included by the
# top-level Makefile, which defines LIBDIR, NVCC and CXX.
#
#   make kernels   lib/libdecodebench_cuda.so   nvcc, sm_80/86/89/90 machine code + compute_90 PTX
#                  (-ldl: cublas.cu opens libcublasLt at run time; it is never linked)
#   make emu       lib/libdecodebench_emu.so    g++ -x c++ on the same .cu files + kernels/emu
#   make emu-test  the emulator's and the kernels' own C++ tests, run under emulation
#   make emu-hazard-test  those and the Go kernel tests under the emulator's hazard modes
#
# nvcc: Debian's CUDA 11.8 nvcc runs g++-11 through its own wrapper
# (/usr/lib/nvidia-cuda-toolkit/bin/g++); g++-12 as host compiler needs -allow-unsupported-compiler
# (its host_config.h rejects gcc > 11), so that is left to NVCC_HOST_FLAGS, e.g.
#   make kernels NVCC_HOST_FLAGS="-ccbin g++-12 -allow-unsupported-compiler"
# CUDA 12/13 accept g++-12 as is.

KERNELS_BUILD   := build
KERNELS_CU      := $(wildcard kernels/*.cu)
KERNELS_DEPS    := $(wildcard kernels/*.h kernels/*.cuh kernels/emu/*.h) kernels/kernels.mk
EMU_RUNTIME_SRC := $(filter-out %_test.cpp,$(wildcard kernels/emu/*.cpp))

NVCC_GENCODE := -gencode arch=compute_80,code=sm_80 -gencode arch=compute_86,code=sm_86 \
                -gencode arch=compute_89,code=sm_89 -gencode arch=compute_90,code=sm_90 \
                -gencode arch=compute_90,code=compute_90
NVCC_HOST_FLAGS ?=
KERNELS_NVCCFLAGS := -O3 -std=c++17 $(NVCC_GENCODE) -Werror all-warnings \
                     -Xcompiler -fPIC,-Wall,-Wextra,-Werror -Xptxas -v $(NVCC_HOST_FLAGS)
EMU_CXXFLAGS := -O2 -std=c++20 -fPIC -pthread -Wall -Wextra -Werror

CUDA_OBJS := $(patsubst kernels/%.cu,$(KERNELS_BUILD)/cuda/%.o,$(KERNELS_CU))
EMU_OBJS  := $(patsubst kernels/%.cu,$(KERNELS_BUILD)/emu/%.o,$(KERNELS_CU)) \
             $(patsubst kernels/emu/%.cpp,$(KERNELS_BUILD)/emu/runtime/%.o,$(EMU_RUNTIME_SRC))

# ---- CUDA ----
# Each object's nvcc output (ptxas -v: registers, stack, spills per kernel and architecture) goes
# to a log beside it and to the terminal; the library rule gathers the logs into
# build/kernels-ptxas.log and fails if a kernel spills.
$(KERNELS_BUILD)/cuda/%.o: kernels/%.cu $(KERNELS_DEPS)
	@mkdir -p $(@D)
	$(NVCC) $(KERNELS_NVCCFLAGS) -c $< -o $@ > $(@:.o=.ptxas.log) 2>&1; \
	  rc=$$?; cat $(@:.o=.ptxas.log); exit $$rc

$(LIBDIR)/libdecodebench_cuda.so: $(CUDA_OBJS) kernels/exports.map kernels/check-spills.sh
	@mkdir -p $(@D)
	cat $(CUDA_OBJS:.o=.ptxas.log) > $(KERNELS_BUILD)/kernels-ptxas.log
	sh kernels/check-spills.sh $(KERNELS_BUILD)/kernels-ptxas.log
	$(NVCC) -shared -cudart static $(NVCC_HOST_FLAGS) -o $@ $(CUDA_OBJS) \
	  -Xlinker --version-script=kernels/exports.map -ldl

# ---- emulation ----
$(KERNELS_BUILD)/emu/%.o: kernels/%.cu $(KERNELS_DEPS)
	@mkdir -p $(@D)
	$(CXX) $(EMU_CXXFLAGS) -x c++ -c $< -o $@

$(KERNELS_BUILD)/emu/runtime/%.o: kernels/emu/%.cpp $(KERNELS_DEPS)
	@mkdir -p $(@D)
	$(CXX) $(EMU_CXXFLAGS) -c $< -o $@

$(LIBDIR)/libdecodebench_emu.so: $(EMU_OBJS) kernels/exports.map
	@mkdir -p $(@D)
	$(CXX) -shared -pthread -o $@ $(EMU_OBJS) -Wl,--version-script=kernels/exports.map

# ---- tests (fast: well under a minute under emulation) ----
# emu_test links the objects, so its own test kernels can use common.cuh's internals;
# linear_test uses only decodebench.h, through the library, as the Go side does.
# emu_test_ucontext runs the same tests on the portable ucontext switch (aarch64 hosts use it):
# make test-full's tier (emu-test-full), since it repeats emu_test on another context switch.
# The -bins targets only build, so that make test can build them in parallel (-j) and run after.
EMU_TEST_BINS      := $(KERNELS_BUILD)/emu/emu_test $(KERNELS_BUILD)/emu/linear_test \
                      $(KERNELS_BUILD)/emu/attention_plan_test
EMU_TEST_FULL_BINS := $(KERNELS_BUILD)/emu/emu_test_ucontext
.PHONY: emu-test emu-test-full emu-test-bins emu-test-full-bins
emu-test-bins: $(EMU_TEST_BINS)
emu-test-full-bins: $(EMU_TEST_FULL_BINS)
emu-test: $(EMU_TEST_BINS)
	$(KERNELS_BUILD)/emu/emu_test
	$(KERNELS_BUILD)/emu/linear_test
	$(KERNELS_BUILD)/emu/attention_plan_test
emu-test-full: $(EMU_TEST_FULL_BINS)
	$(KERNELS_BUILD)/emu/emu_test_ucontext

# The same C++ tests and the Go kernel tests' correctness subset again under the emulator's hazard
# modes (emu.h): thread order reversed, then shuffled, then blocks interleaved (several in flight,
# with the cross-block write check), with cp.async landing only at its wait_group and shared
# memory poisoned at every block's start, so a missing barrier, wait or atomic shows up as wrong
# values or a launch error; then the quantized linears with lanes of a warp apart at ldmatrix
# (DB_EMU_HAZARDS=warp), so a missing __syncwarp shows too. -count=1: Go's test cache does not see variables C reads.
EMU_HAZARD_SCHEDULES := reverse shuffle:1 interleave:1
EMU_HAZARD_GO_PKGS   := ./cgo ./cmd/decodebench ./bench/measure
EMU_HAZARD_GO_RUN    := ^Test(Verify|Linear|Attention|Probe|SmallOp|Survivor|MLA)
.PHONY: emu-hazard-test
emu-hazard-test: $(KERNELS_BUILD)/emu/emu_test $(KERNELS_BUILD)/emu/linear_test \
                 $(LIBDIR)/libdecodebench_emu.so
	@set -e; for schedule in $(EMU_HAZARD_SCHEDULES); do \
	  echo "emu-hazard-test: DB_EMU_SCHEDULE=$$schedule DB_EMU_HAZARDS=all"; \
	  export DB_EMU_SCHEDULE=$$schedule DB_EMU_HAZARDS=all; \
	  $(KERNELS_BUILD)/emu/emu_test; \
	  $(KERNELS_BUILD)/emu/linear_test; \
	  DECODEBENCH_KERNELS=$(CURDIR)/$(LIBDIR)/libdecodebench_emu.so DECODEBENCH_REQUIRE_EMU=1 \
	    $(GO) test -count=1 -run '$(EMU_HAZARD_GO_RUN)' $(EMU_HAZARD_GO_PKGS); \
	done; \
	echo "emu-hazard-test: DB_EMU_SCHEDULE=shuffle:1 DB_EMU_HAZARDS=all,warp (the quantized linears)"; \
	DB_EMU_SCHEDULE=shuffle:1 DB_EMU_HAZARDS=all,warp \
	  DECODEBENCH_KERNELS=$(CURDIR)/$(LIBDIR)/libdecodebench_emu.so DECODEBENCH_REQUIRE_EMU=1 \
	  $(GO) test -count=1 -run '^TestLinearQuant' ./cgo

$(KERNELS_BUILD)/emu/emu_test: kernels/emu/emu_test.cpp $(EMU_OBJS)
	$(CXX) $(EMU_CXXFLAGS) -o $@ $< $(EMU_OBJS)

# The attention planner with a 132-SM context (kernels/attention_plan_test.cpp); links the
# objects, as emu_test does, to set the context's SM count.
$(KERNELS_BUILD)/emu/attention_plan_test: kernels/attention_plan_test.cpp $(EMU_OBJS)
	$(CXX) $(EMU_CXXFLAGS) -Ikernels -o $@ $< $(EMU_OBJS)

# The scheduler's files share scheduler.h's Context (the switch), so all of them build again.
EMU_SCHEDULER     := fibers faults hazards scheduler
EMU_UCONTEXT_OBJS := $(filter-out $(EMU_SCHEDULER:%=$(KERNELS_BUILD)/emu/runtime/%.o),$(EMU_OBJS)) \
                     $(EMU_SCHEDULER:%=$(KERNELS_BUILD)/emu/ucontext/%.o)
$(KERNELS_BUILD)/emu/ucontext/%.o: kernels/emu/%.cpp $(KERNELS_DEPS)
	@mkdir -p $(@D)
	$(CXX) $(EMU_CXXFLAGS) -DDB_EMU_UCONTEXT -c $< -o $@

$(KERNELS_BUILD)/emu/emu_test_ucontext: kernels/emu/emu_test.cpp $(EMU_UCONTEXT_OBJS)
	$(CXX) $(EMU_CXXFLAGS) -o $@ $< $(EMU_UCONTEXT_OBJS)

$(KERNELS_BUILD)/emu/linear_test: kernels/emu/linear_test.cpp $(LIBDIR)/libdecodebench_emu.so
	$(CXX) $(EMU_CXXFLAGS) -o $@ $< -L$(LIBDIR) -ldecodebench_emu -Wl,-rpath,$(CURDIR)/$(LIBDIR)

# ---- on a GPU machine: the same C++ checks against the CUDA library (CI builds, never runs) ----
.PHONY: cuda-test
cuda-test: $(KERNELS_BUILD)/cuda/linear_test
	$(KERNELS_BUILD)/cuda/linear_test

$(KERNELS_BUILD)/cuda/linear_test: kernels/emu/linear_test.cpp $(LIBDIR)/libdecodebench_cuda.so
	@mkdir -p $(@D)
	$(CXX) $(EMU_CXXFLAGS) -o $@ $< -L$(LIBDIR) -ldecodebench_cuda -Wl,-rpath,'$$ORIGIN/../../$(LIBDIR)'

# ---- the static performance gate (cmd/kernels-check; see kernels/README.md, "Static gate") ----
# make kernels-check: the sm_90 SASS of the objects `make kernels` built, against the minimums of
# kernels/perf-manifest.json; prints the table, writes build/kernels-check.json, fails below a
# minimum. The waves section plans through the emulator library as a 132-SM card (DB_EMU_SM_COUNT).
# make kernels-check-selftest: plants a regression (`#pragma unroll 1` on the GEMV's load loop) in
# a copy of linear.cu, compiles that file alone for sm_90, and passes only if the gate then fails
# on the GEMV (and names it).
KERNELS_CHECK      := bin/kernels-check
KERNELS_MANIFEST   := kernels/perf-manifest.json
KERNELS_CHECK_ARGS ?=
# The line of linear.cu the selftest puts `#pragma unroll 1` on: the GEMV's 16-byte load loop.
KERNELS_SELFTEST_LOOP ?= for (int u = 0; u < kGemvUnroll; ++u) {
KERNELS_SELFTEST_DIR  := $(KERNELS_BUILD)/selftest

.PHONY: kernels-check kernels-check-selftest kernels-check-testdata $(KERNELS_CHECK)
$(KERNELS_CHECK):
	$(GO) build -o $@ ./cmd/kernels-check

kernels-check: $(KERNELS_CHECK) $(LIBDIR)/libdecodebench_cuda.so $(LIBDIR)/libdecodebench_emu.so
	$(KERNELS_CHECK) -manifest $(KERNELS_MANIFEST) -ptxas $(KERNELS_BUILD)/kernels-ptxas.log \
	  -json $(KERNELS_BUILD)/kernels-check.json -library $(LIBDIR)/libdecodebench_emu.so \
	  $(KERNELS_CHECK_ARGS) $(CUDA_OBJS)

# The linear kernels' sm_90 ptxas figures, checked in for the Go test that holds every preset's
# linear launches to the wave rule on a machine without nvcc (cmd/kernels-check/presets_test.go;
# where the build's log exists the test reads it and fails when this copy differs).
kernels-check-testdata: $(LIBDIR)/libdecodebench_cuda.so
	awk -v q="'" '/Compiling entry function/ { split($$0, p, q); keep = p[4] == "sm_90" && p[2] ~ /linear_(gemv|mma|tiled|splitk_reduce|streamk_reduce)_kernel/ } \
	  keep { print } /Used [0-9]+ registers/ { keep = 0 }' $(KERNELS_BUILD)/kernels-ptxas.log \
	  > cmd/kernels-check/testdata/linear-ptxas.log

KERNELS_SELFTEST_KEEP := $(filter-out %/linear_gemv.o,$(CUDA_OBJS))
kernels-check-selftest: $(KERNELS_CHECK) $(LIBDIR)/libdecodebench_cuda.so
	@mkdir -p $(KERNELS_SELFTEST_DIR)
	@sh kernels/plant-unroll1.sh kernels/linear_gemv.cu '$(KERNELS_SELFTEST_LOOP)' > $(KERNELS_SELFTEST_DIR)/linear_gemv.cu
	$(NVCC) -O3 -std=c++17 -Ikernels -gencode arch=compute_90,code=sm_90 -Xptxas -v $(NVCC_HOST_FLAGS) \
	  -Xcompiler -fPIC -c $(KERNELS_SELFTEST_DIR)/linear_gemv.cu -o $(KERNELS_SELFTEST_DIR)/linear_gemv.o \
	  > $(KERNELS_SELFTEST_DIR)/linear_gemv.ptxas.log 2>&1 || { cat $(KERNELS_SELFTEST_DIR)/linear_gemv.ptxas.log; exit 1; }
	cat $(KERNELS_SELFTEST_KEEP:.o=.ptxas.log) $(KERNELS_SELFTEST_DIR)/linear_gemv.ptxas.log > $(KERNELS_SELFTEST_DIR)/ptxas.log
	@set +e; $(KERNELS_CHECK) -manifest $(KERNELS_MANIFEST) -ptxas $(KERNELS_SELFTEST_DIR)/ptxas.log \
	  -json $(KERNELS_SELFTEST_DIR)/kernels-check.json -library none \
	  $(KERNELS_SELFTEST_KEEP) $(KERNELS_SELFTEST_DIR)/linear_gemv.o \
	  > $(KERNELS_SELFTEST_DIR)/gate.out 2>&1; rc=$$?; set -e; cat $(KERNELS_SELFTEST_DIR)/gate.out; \
	if [ $$rc -ne 1 ]; then echo "kernels-check-selftest: FAIL: the gate exited $$rc on the planted regression, want 1"; exit 1; fi; \
	if ! grep -q '^linear_gemv_kernel<__nv_bfloat16, 1, true, 1> .* FAIL ' $(KERNELS_SELFTEST_DIR)/gate.out; then \
	  echo "kernels-check-selftest: FAIL: the gate failed, but not on linear_gemv_kernel<__nv_bfloat16, 1, true, 1>'s loop"; exit 1; fi; \
	if grep ' FAIL ' $(KERNELS_SELFTEST_DIR)/gate.out | grep -v '^linear_gemv_kernel<'; then \
	  echo "kernels-check-selftest: FAIL: kernels the regression did not touch failed too (above)"; exit 1; fi; \
	echo "kernels-check-selftest: ok: the gate fails on the planted regression (#pragma unroll 1 on the GEMV's load loop)"
