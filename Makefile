# decodebench: `make run` (the main job), `make test` (the tests). See README.md.
GO      ?= go
CXX     ?= g++
NVCC    ?= nvcc
BIN     := bin/decodebench
LIBDIR  := lib
# go-nvml's nvml.h declares deprecated functions; silence their warnings in every cgo build.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

.PHONY: all build kernels emu test run clean

all: build emu

build: $(BIN)

$(BIN): FORCE
	$(GO) build -o $(BIN) ./cmd/decodebench

FORCE:

# ---- kernels (owned by kernels/: see kernels/README section in README.md) ----
kernels: $(LIBDIR)/libdecodebench_cuda.so
emu: $(LIBDIR)/libdecodebench_emu.so

include kernels/kernels.mk

test: emu emu-test
	DECODEBENCH_KERNELS=$(CURDIR)/$(LIBDIR)/libdecodebench_emu.so DECODEBENCH_REQUIRE_EMU=1 $(GO) test ./...

run: build
	./$(BIN) predict --model llama3-8b --gpu auto --out out/predict

clean:
	rm -rf bin lib build
