package roofline

import (
	"errors"
	"fmt"
	"math"
)

// StepModel is what the roofline needs to know about a model: the bytes one decode step must
// read and the FLOPs it must do. bench/model's shapes implement it.
type StepModel interface {
	// WeightBytesPerStep is the weight bytes one step reads at this batch (for a mixture of
	// experts, only the experts the batch touches).
	WeightBytesPerStep(batch int) float64
	// KVBytesPerSequence is the KV-cache bytes one sequence reads at this context length.
	KVBytesPerSequence(context int) float64
	// StateBytesPerSequence is the recurrent state one sequence keeps (Gated DeltaNet, Mamba-2
	// layers), whatever the context: a step reads it and writes it back, so it moves twice.
	StateBytesPerSequence() float64
	// FLOPsPerStep is the FLOPs of one step for the whole batch.
	FLOPsPerStep(batch, context int) float64
	// WeightBytesTotal is every weight byte resident in memory (all experts).
	WeightBytesTotal() float64
}

// Ceiling names.
const (
	CeilingDatasheet = "datasheet" // vendor spec row, or NVML's memory clock x bus width x 2
	CeilingMeasured  = "measured"  // decodebench's own bandwidth and compute probes
)

// Ceiling is the pair of roofs a step is held against.
type Ceiling struct {
	Name                 string // CeilingDatasheet or CeilingMeasured
	BandwidthBytesPerSec float64
	FLOPsPerSec          float64
}

// DatasheetCeiling is the spec row's memory bandwidth and dense bf16 tensor rate.
func DatasheetCeiling(g GPU) Ceiling {
	return Ceiling{Name: CeilingDatasheet, BandwidthBytesPerSec: g.BandwidthBytesPerSec, FLOPsPerSec: g.TensorBF16FLOPs}
}

// ErrInvalidCeiling is wrapped by Validate for a zero, negative, NaN or infinite roof.
var ErrInvalidCeiling = errors.New("invalid ceiling")

// Validate reports whether both roofs are positive finite numbers. Every function here treats a
// ceiling that fails it as giving no bound at all (see StepBound), so check it where a ceiling
// is built, for instance from a probe that may have measured nothing.
func (c Ceiling) Validate() error {
	if !positiveFinite(c.BandwidthBytesPerSec) {
		return fmt.Errorf("%w %q: memory bandwidth %g B/s must be positive", ErrInvalidCeiling, c.Name, c.BandwidthBytesPerSec)
	}
	if !positiveFinite(c.FLOPsPerSec) {
		return fmt.Errorf("%w %q: arithmetic rate %g FLOP/s must be positive", ErrInvalidCeiling, c.Name, c.FLOPsPerSec)
	}
	return nil
}

// Limits of a Bound.
const (
	LimitMemory  = "memory"
	LimitCompute = "compute"
)

// Bound is the least time one decode step can take at a batch and context, and the tokens/s
// that allows at both levels: per request (1 / step) and per server (batch / step).
type Bound struct {
	Ceiling        string // the Ceiling's Name
	Batch, Context int
	// Bytes and FLOPs of the step: WeightBytes at this batch, KVBytes = Batch x per sequence,
	// StateBytes = Batch x 2 x the recurrent state per sequence (read and written back).
	WeightBytes, KVBytes, StateBytes, FLOPs float64
	// StepSeconds = max(MemorySeconds, ComputeSeconds).
	MemorySeconds, ComputeSeconds, StepSeconds    float64
	PerRequestTokensPerSec, PerServerTokensPerSec float64
	// Limit is LimitMemory or LimitCompute (memory on a tie), or "" when there is no bound.
	Limit               string
	ArithmeticIntensity float64 // FLOPs per byte moved
}

// StepBound is the roofline bound of one decode step:
//
//	step >= max( (WeightBytesPerStep(B) + B * (KVBytesPerSequence(S) + 2 * StateBytesPerSequence)) / bandwidth ,
//	             FLOPsPerStep(B, S) / arithmetic rate )
//
// Context 0 is allowed (a step that reads no KV cache). A batch below 1, a negative context or
// an invalid ceiling (see Ceiling.Validate) give no bound: a Bound with only Ceiling, Batch and
// Context set, zero times and rates, and Limit "".
func StepBound(m StepModel, c Ceiling, batch, context int) Bound {
	b := Bound{Ceiling: c.Name, Batch: batch, Context: context}
	if batch < 1 || context < 0 || c.Validate() != nil {
		return b
	}
	b.WeightBytes = m.WeightBytesPerStep(batch)
	b.KVBytes = float64(batch) * m.KVBytesPerSequence(context)
	b.StateBytes = 2 * float64(batch) * m.StateBytesPerSequence()
	b.FLOPs = m.FLOPsPerStep(batch, context)
	bytes := b.WeightBytes + b.KVBytes + b.StateBytes
	b.MemorySeconds = bytes / c.BandwidthBytesPerSec
	b.ComputeSeconds = b.FLOPs / c.FLOPsPerSec
	b.Limit = LimitMemory
	b.StepSeconds = b.MemorySeconds
	if b.ComputeSeconds > b.MemorySeconds {
		b.Limit = LimitCompute
		b.StepSeconds = b.ComputeSeconds
	}
	if b.StepSeconds > 0 {
		b.PerRequestTokensPerSec = 1 / b.StepSeconds
		b.PerServerTokensPerSec = float64(batch) / b.StepSeconds
	}
	if bytes > 0 {
		b.ArithmeticIntensity = b.FLOPs / bytes
	}
	return b
}

// CriticalBatch is the smallest batch in [1, maxBatch] at which the step is compute-bound
// (compute time strictly above memory time). It scans every batch, because a mixture of experts'
// weight bytes need not grow smoothly with the batch. It returns false when no batch up to
// maxBatch is compute-bound (a long context's KV cache can keep the step memory-bound at any
// batch), and for an invalid ceiling or a negative context.
func CriticalBatch(m StepModel, c Ceiling, context, maxBatch int) (int, bool) {
	if c.Validate() != nil || context < 0 {
		return 0, false
	}
	for batch := 1; batch <= maxBatch; batch++ {
		if StepBound(m, c, batch, context).Limit == LimitCompute {
			return batch, true
		}
	}
	return 0, false
}

// MaxBatchThatFits is how many sequences of this context fit in memory beside the weights:
//
//	floor( (memoryBytes * (1 - reserveFraction) - WeightBytesTotal) / (KVBytesPerSequence(context) + StateBytesPerSequence) )
//
// It is 0 when the weights alone do not fit, and for a memory size that is not positive, a
// reserve outside [0, 1) or a negative context. When a sequence needs no bytes (context 0, no
// recurrent state) any batch fits and it returns math.MaxInt.
func MaxBatchThatFits(m StepModel, memoryBytes float64, context int, reserveFraction float64) int {
	if !positiveFinite(memoryBytes) || !(reserveFraction >= 0 && reserveFraction < 1) || context < 0 {
		return 0
	}
	free := memoryBytes*(1-reserveFraction) - m.WeightBytesTotal()
	if free < 0 {
		return 0
	}
	kv := m.KVBytesPerSequence(context) + m.StateBytesPerSequence()
	if kv <= 0 {
		return math.MaxInt
	}
	n := math.Floor(free / kv)
	if n >= math.MaxInt {
		return math.MaxInt
	}
	return int(n)
}

// Efficiency is the fraction of the bound a measured step reached: bound step time / measured
// step time. Above 1 means the measurement beat the ceiling: the ceiling is wrong, or the data
// came from cache rather than memory. It is 0 when either time is not positive.
func Efficiency(measuredSeconds float64, b Bound) float64 {
	if !positiveFinite(measuredSeconds) || !positiveFinite(b.StepSeconds) {
		return 0
	}
	return b.StepSeconds / measuredSeconds
}

func positiveFinite(x float64) bool {
	return x > 0 && !math.IsInf(x, 0) // NaN fails x > 0
}
