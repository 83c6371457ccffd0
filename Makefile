# decodebench: `make run` (the main job), `make test` (the tests). See README.md.
GO      ?= go
CXX     ?= g++
NVCC    ?= nvcc
BIN     := bin/decodebench
LIBDIR  := lib
# go-nvml's nvml.h declares deprecated functions; silence their warnings in every cgo build.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

.PHONY: all build kernels emu test test-full run clean

# Cores for the parallel builds (the emulated library's objects compile one a core).
NPROC ?= $(shell nproc 2>/dev/null || echo 2)

all: build emu

build: $(BIN)

# The version recorded in every run.json: the git commit, marked -dirty with uncommitted changes.
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)

$(BIN): FORCE
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/decodebench

FORCE:

# ---- kernels (owned by kernels/: see kernels/README section in README.md) ----
# Both libraries build one object a core whatever -j the caller gave (a sub-make with -j$(NPROC)).
kernels:
	@$(MAKE) --no-print-directory -j$(NPROC) $(LIBDIR)/libdecodebench_cuda.so
emu:
	@$(MAKE) --no-print-directory -j$(NPROC) $(LIBDIR)/libdecodebench_emu.so

include kernels/kernels.mk

# Two tiers (internal/testtier). make test: the fast tier, what a newcomer runs (under 5 minutes on
# a fresh clone of a 2-core machine, compile included): the emulated library built in parallel, the
# emulator's C++ tests, then `go test -short`. make test-full (CI): every test, the slow tier
# included, and the kernel tests again under the emulator's hazard modes (emu-hazard-test).
TEST_ENV := DECODEBENCH_KERNELS=$(CURDIR)/$(LIBDIR)/libdecodebench_emu.so DECODEBENCH_REQUIRE_EMU=1

test: emu
	@$(MAKE) --no-print-directory -j$(NPROC) emu-test-bins
	@$(MAKE) --no-print-directory emu-test
	$(TEST_ENV) $(GO) test -short -timeout 20m ./...

test-full: emu
	@$(MAKE) --no-print-directory -j$(NPROC) emu-test-bins emu-test-full-bins
	@$(MAKE) --no-print-directory emu-test emu-test-full emu-hazard-test
	$(TEST_ENV) $(GO) test -timeout 30m ./...

# On a GPU box: the default sweep (Llama-3-8B, batch 1-1024, contexts 1k-32k, trimmed by --budget
# to 9 minutes) into out/sweep-<date>-<time>, each configuration both composed from its kernels and
# run as a whole step (eager and as a CUDA graph: steps.jsonl), then where its report is. Without a
# usable GPU (NVML sees none): predict the roofline for an H200 instead, and say last, where it
# stays on an 80-column screen, why and that nothing was measured.
run: build
	@if ./$(BIN) info >/dev/null 2>&1; then \
	  out=out/sweep-$$(date +%Y%m%d-%H%M%S); \
	  [ -f $(LIBDIR)/libdecodebench_cuda.so ] || $(MAKE) --no-print-directory kernels || exit 1; \
	  echo "make run: sweeping Llama-3-8B on this GPU into $$out (9 minutes at most)"; \
	  ./$(BIN) sweep --backend cuda --model llama3-8b --batch '1-1024*2' --context '1k-32k*2' --step both --budget 9m --out $$out; \
	  rc=$$?; echo "make run: report: $$out/report.html"; exit $$rc; \
	else \
	  why=$$(./$(BIN) info 2>&1 | tail -n 1 | sed 's/^decodebench: //'); \
	  echo "make run: no usable NVIDIA GPU here: predicting the roofline for an H200 instead"; echo; \
	  ./$(BIN) predict --model llama3-8b --gpu h200 --out out/predict || exit $$?; \
	  echo; \
	  echo "make run: NOTHING WAS MEASURED: no usable NVIDIA GPU here ($$why). The numbers above are the roofline prediction for an H200 (decodebench predict), not a measurement." | fold -s -w 80; \
	fi

clean:
	rm -rf bin lib build
