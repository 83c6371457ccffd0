package roofline

import (
	"errors"
	"math"
	"testing"
)

// fakeModel is a dense model with round numbers: every step reads all weights, each sequence
// reads kvPerToken bytes per token of context, and each token costs flopsPerToken plus
// attnFLOPsPerKVByte per KV byte it reads.
type fakeModel struct {
	weights            float64
	kvPerToken         float64
	flopsPerToken      float64
	attnFLOPsPerKVByte float64
}

func (m fakeModel) WeightBytesPerStep(int) float64 { return m.weights }
func (m fakeModel) StateBytesPerSequence() float64 { return 0 }

func (m fakeModel) KVBytesPerSequence(context int) float64 {
	return m.kvPerToken * float64(context)
}
func (m fakeModel) FLOPsPerStep(batch, context int) float64 {
	return float64(batch) * (m.flopsPerToken + m.attnFLOPsPerKVByte*m.KVBytesPerSequence(context))
}
func (m fakeModel) WeightBytesTotal() float64 { return m.weights }

// llama8B is roughly Llama-3-8B in bf16: 15 GB of weights, 2 FLOPs per weight per token,
// 128 KiB of KV per token (32 layers x 8 KV heads x 128 x 2 (K and V) x 2 bytes).
var llama8B = fakeModel{weights: 15e9, kvPerToken: 131072, flopsPerToken: 15e9, attnFLOPsPerKVByte: 2}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }

func TestStepBoundH200Batch1(t *testing.T) {
	h200, _ := LookupGPU("h200")
	b := StepBound(llama8B, DatasheetCeiling(h200), 1, 0)
	// 15 GB / 4.8 TB/s = 3.125 ms, so at most 320 tokens/s for the one request.
	if !near(b.MemorySeconds, 3.125e-3) || !near(b.StepSeconds, 3.125e-3) {
		t.Errorf("step %g s, memory %g s; want 3.125 ms", b.StepSeconds, b.MemorySeconds)
	}
	if !near(b.PerRequestTokensPerSec, 320) || !near(b.PerServerTokensPerSec, 320) {
		t.Errorf("tokens/s %g per request, %g per server; want 320", b.PerRequestTokensPerSec, b.PerServerTokensPerSec)
	}
	if b.Limit != LimitMemory || b.Ceiling != CeilingDatasheet {
		t.Errorf("limit %q ceiling %q", b.Limit, b.Ceiling)
	}
	if !near(b.ArithmeticIntensity, 1) { // 15e9 FLOPs over 15e9 bytes
		t.Errorf("intensity %g, want 1", b.ArithmeticIntensity)
	}
}

func TestStepBound(t *testing.T) {
	c := Ceiling{Name: CeilingMeasured, BandwidthBytesPerSec: 1e12, FLOPsPerSec: 100e12}
	m := fakeModel{weights: 1e9, kvPerToken: 1000, flopsPerToken: 1e9, attnFLOPsPerKVByte: 2}
	tests := []struct {
		desc                             string
		batch, context                   int
		kvBytes, flops, memMs, computeMs float64
		limit                            string
		perRequest, perServer, intensity float64
	}{
		// memory: (1e9 + 8 x 1e6) B / 1e12 = 1.008 ms; compute: 8 x (1e9 + 2e6) / 1e14 = 0.08016 ms.
		{"memory-bound", 8, 1000, 8e6, 8.016e9, 1.008, 0.08016, LimitMemory, 1 / 1.008e-3, 8 / 1.008e-3, 8.016e9 / 1.008e9},
		// batch 100, no KV: 1 ms each way; a tie is memory-bound.
		{"tie", 100, 0, 0, 100e9, 1, 1, LimitMemory, 1000, 100000, 100},
		// batch 200, no KV: memory 1 ms, compute 2 ms.
		{"compute-bound", 200, 0, 0, 200e9, 1, 2, LimitCompute, 500, 100000, 200},
	}
	for _, tc := range tests {
		b := StepBound(m, c, tc.batch, tc.context)
		if b.Batch != tc.batch || b.Context != tc.context || b.Limit != tc.limit || b.WeightBytes != 1e9 ||
			!near(b.KVBytes, tc.kvBytes) || !near(b.FLOPs, tc.flops) ||
			!near(b.MemorySeconds, tc.memMs*1e-3) || !near(b.ComputeSeconds, tc.computeMs*1e-3) ||
			!near(b.StepSeconds, math.Max(tc.memMs, tc.computeMs)*1e-3) ||
			!near(b.PerRequestTokensPerSec, tc.perRequest) || !near(b.PerServerTokensPerSec, tc.perServer) ||
			!near(b.ArithmeticIntensity, tc.intensity) {
			t.Errorf("%s: %+v", tc.desc, b)
		}
	}
}

func TestStepBoundNoBound(t *testing.T) {
	good := Ceiling{Name: "x", BandwidthBytesPerSec: 1e12, FLOPsPerSec: 1e14}
	tests := []struct {
		desc           string
		c              Ceiling
		batch, context int
	}{
		{"batch 0", good, 0, 1024},
		{"negative batch", good, -1, 1024},
		{"negative context", good, 1, -1},
		{"zero bandwidth", Ceiling{FLOPsPerSec: 1e14}, 1, 1024},
		{"zero rate", Ceiling{BandwidthBytesPerSec: 1e12}, 1, 1024},
		{"NaN bandwidth", Ceiling{BandwidthBytesPerSec: math.NaN(), FLOPsPerSec: 1e14}, 1, 1024},
		{"infinite rate", Ceiling{BandwidthBytesPerSec: 1e12, FLOPsPerSec: math.Inf(1)}, 1, 1024},
	}
	for _, tc := range tests {
		b := StepBound(llama8B, tc.c, tc.batch, tc.context)
		want := Bound{Ceiling: tc.c.Name, Batch: tc.batch, Context: tc.context}
		if b != want {
			t.Errorf("%s: got %+v, want no bound", tc.desc, b)
		}
		if Efficiency(1e-3, b) != 0 {
			t.Errorf("%s: efficiency against no bound must be 0", tc.desc)
		}
	}
}

func TestCeilingValidate(t *testing.T) {
	if err := (Ceiling{Name: "ok", BandwidthBytesPerSec: 1, FLOPsPerSec: 1}).Validate(); err != nil {
		t.Errorf("valid ceiling rejected: %v", err)
	}
	for _, c := range []Ceiling{{}, {BandwidthBytesPerSec: 1}, {FLOPsPerSec: 1}, {BandwidthBytesPerSec: -1, FLOPsPerSec: 1}} {
		if err := c.Validate(); !errors.Is(err, ErrInvalidCeiling) {
			t.Errorf("%+v: Validate() = %v, want ErrInvalidCeiling", c, err)
		}
	}
	for _, g := range GPUs() {
		if err := DatasheetCeiling(g).Validate(); err != nil {
			t.Errorf("%s: %v", g.Key, err)
		}
	}
}

func TestCriticalBatch(t *testing.T) {
	c := Ceiling{BandwidthBytesPerSec: 1e12, FLOPsPerSec: 100e12}
	noKV := fakeModel{weights: 1e9, flopsPerToken: 1e9}
	// Memory 1 ms at every batch, compute B x 0.01 ms: a tie at 100, compute-bound from 101.
	if b, ok := CriticalBatch(noKV, c, 0, 1000); !ok || b != 101 {
		t.Errorf("CriticalBatch = %d, %v; want 101", b, ok)
	}
	if _, ok := CriticalBatch(noKV, c, 0, 100); ok {
		t.Error("compute-bound below batch 101")
	}
	// 1 GB of KV per sequence with 2 FLOPs per KV byte: each sequence adds 1 ms of memory time
	// and 0.03 ms of compute, so no batch is ever compute-bound.
	longKV := fakeModel{weights: 1e9, kvPerToken: 1e6, flopsPerToken: 1e9, attnFLOPsPerKVByte: 2}
	if b, ok := CriticalBatch(longKV, c, 1000, 1<<16); ok {
		t.Errorf("long context turned compute-bound at %d", b)
	}
	if _, ok := CriticalBatch(noKV, Ceiling{}, 0, 1000); ok {
		t.Error("zero ceiling gave a critical batch")
	}
	if _, ok := CriticalBatch(noKV, c, -1, 1000); ok {
		t.Error("negative context gave a critical batch")
	}
	// H200 and Llama-3-8B with no KV: compute-bound once B x 15 GFLOP / 989.4 TFLOP/s > 3.125 ms,
	// that is B > 206.1.
	h200, _ := LookupGPU("h200")
	if b, ok := CriticalBatch(llama8B, DatasheetCeiling(h200), 0, 1<<16); !ok || b != 207 {
		t.Errorf("H200 critical batch = %d, %v; want 207", b, ok)
	}
}

func TestMaxBatchThatFits(t *testing.T) {
	m := fakeModel{weights: 16e9, kvPerToken: 1e6}
	tests := []struct {
		desc    string
		memory  float64
		context int
		reserve float64
		want    int
	}{
		// (80e9 x 0.9 - 16e9) / 1e9 = 56
		{"fits 56", 80e9, 1000, 0.1, 56},
		// (80e9 - 16e9) / 3e9 = 21.33
		{"floored", 80e9, 3000, 0, 21},
		{"weights only just fit", 16e9, 1000, 0, 0},
		{"weights do not fit", 10e9, 1000, 0, 0},
		{"no KV at context 0", 80e9, 0, 0.1, math.MaxInt},
		{"reserve 1", 80e9, 1000, 1, 0},
		{"negative reserve", 80e9, 1000, -0.1, 0},
		{"NaN reserve", 80e9, 1000, math.NaN(), 0},
		{"zero memory", 0, 1000, 0.1, 0},
		{"negative context", 80e9, -1, 0.1, 0},
	}
	for _, tc := range tests {
		if got := MaxBatchThatFits(m, tc.memory, tc.context, tc.reserve); got != tc.want {
			t.Errorf("%s: MaxBatchThatFits = %d, want %d", tc.desc, got, tc.want)
		}
	}
}

func TestEfficiency(t *testing.T) {
	b := Bound{StepSeconds: 3.125e-3}
	tests := []struct {
		measured, want float64
	}{
		{3.90625e-3, 0.8},
		{3.125e-3, 1},
		{2.5e-3, 1.25}, // beat the ceiling: reported, not clamped
		{0, 0},
		{-1, 0},
		{math.Inf(1), 0},
	}
	for _, tc := range tests {
		if got := Efficiency(tc.measured, b); !near(got, tc.want) {
			t.Errorf("Efficiency(%g) = %g, want %g", tc.measured, got, tc.want)
		}
	}
}
