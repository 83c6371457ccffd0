package cgo

// #include "shim.h"
import "C"

import (
	"fmt"
	"strings"
)

// ProbeKind is a DB_PROBE_* measurement of a ceiling.
type ProbeKind int32

const (
	ProbeRead    ProbeKind = C.DB_PROBE_READ     // result[0] = uint32 wrap-around sum of a
	ProbeWrite   ProbeKind = C.DB_PROBE_WRITE    // a[i] = db_write_word(seed, i)
	ProbeCopy    ProbeKind = C.DB_PROBE_COPY     // b[i] = a[i]
	ProbeTriad   ProbeKind = C.DB_PROBE_TRIAD    // a[i] = b[i] + scalar * c[i], float32
	ProbeFMAF32  ProbeKind = C.DB_PROBE_FMA_F32  // fp32 FMA chains; one float per thread
	ProbeMMABF16 ProbeKind = C.DB_PROBE_MMA_BF16 // mma.sync bf16 chains; one float per thread
)

// ProbeKinds lists every probe, by its command-line name.
var ProbeKinds = []ProbeKind{ProbeRead, ProbeWrite, ProbeCopy, ProbeTriad, ProbeFMAF32, ProbeMMABF16}

var probeNames = map[ProbeKind]string{
	ProbeRead: "read", ProbeWrite: "write", ProbeCopy: "copy", ProbeTriad: "triad",
	ProbeFMAF32: "fma", ProbeMMABF16: "mma",
}

func (k ProbeKind) String() string {
	if name, ok := probeNames[k]; ok {
		return name
	}
	return fmt.Sprintf("probe(%d)", int32(k))
}

// Memory reports whether the probe measures bandwidth (else arithmetic rate).
func (k ProbeKind) Memory() bool { return k <= ProbeTriad }

// ParseProbeKind accepts read, write, copy, triad, fma or mma.
func ParseProbeKind(s string) (ProbeKind, error) {
	names := make([]string, 0, len(ProbeKinds))
	for _, k := range ProbeKinds {
		if k.String() == s {
			return k, nil
		}
		names = append(names, k.String())
	}
	return 0, fmt.Errorf("unknown probe %q (want %s)", s, strings.Join(names, ", "))
}

// ProbeParams mirrors the inputs of db_probe_params.
type ProbeParams struct {
	Kind       ProbeKind
	A, B, C    uint64  // device buffers; which ones each kind uses: see ProbeKind
	Words      uint64  // memory probes: 32-bit words in each buffer
	Result     uint64  // READ: 1 uint32; FMA/MMA: one float per launched thread
	Seed       uint64  // WRITE
	Scalar     float32 // TRIAD
	Blocks     int     // 0 = auto (enough bytes in flight to fill every SM)
	Threads    int     // 0 = auto
	Iterations int     // compute probes: loop trips per thread
}

// ProbeResult is what db_probe writes back: the minimum work the launch did.
type ProbeResult struct {
	BytesMoved  float64
	FLOPs       float64
	BlocksUsed  int
	ThreadsUsed int // per block
}

func (p ProbeParams) toC(op string) (C.db_probe_params, error) {
	var c C.db_probe_params
	var err error
	c.kind = C.int32_t(p.Kind)
	c.a, c.b, c.c = C.uint64_t(p.A), C.uint64_t(p.B), C.uint64_t(p.C)
	c.words, c.result, c.seed = C.uint64_t(p.Words), C.uint64_t(p.Result), C.uint64_t(p.Seed)
	c.scalar = C.float(p.Scalar)
	if c.blocks, err = toInt32(op, "blocks", p.Blocks); err != nil {
		return c, err
	}
	if c.threads, err = toInt32(op, "threads", p.Threads); err != nil {
		return c, err
	}
	if c.iterations, err = toInt32(op, "iterations", p.Iterations); err != nil {
		return c, err
	}
	return c, nil
}

func probeResultFromC(c *C.db_probe_params) ProbeResult {
	return ProbeResult{
		BytesMoved:  float64(c.bytes_moved),
		FLOPs:       float64(c.flops),
		BlocksUsed:  int(c.blocks_used),
		ThreadsUsed: int(c.threads_used),
	}
}

// ProbePlan validates p and resolves the launch without running it: the blocks and threads
// it would use and the work it would do. The compute probes write one float per launched
// thread (BlocksUsed·ThreadsUsed) to Result: size that buffer from this first.
func (d *Device) ProbePlan(p ProbeParams) (ProbeResult, error) {
	const op = "db_probe_plan"
	c, err := p.toC(op)
	if err != nil {
		return ProbeResult{}, err
	}
	if err := d.Do(func() error { return d.check(op, C.dbshim_probe_plan(d.lib.api, d.ctx, &c)) }); err != nil {
		return ProbeResult{}, err
	}
	return probeResultFromC(&c), nil
}

// Probe launches one probe on the device's stream.
func (d *Device) Probe(p ProbeParams) (ProbeResult, error) {
	const op = "db_probe"
	c, err := p.toC(op)
	if err != nil {
		return ProbeResult{}, err
	}
	if err := d.Do(func() error { return d.check(op, C.dbshim_probe(d.lib.api, d.ctx, &c)) }); err != nil {
		return ProbeResult{}, err
	}
	return probeResultFromC(&c), nil
}
