package validate

import (
	"fmt"
	"math"
	"sync"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/timing"
	"github.com/decodebench/decodebench/cgo"
)

// DeviceRunner measures steps on a cgo.Device through bench/measure: each kernel verified
// against bench/ref, then timed with its operands rotated out of L2.
type DeviceRunner struct {
	Device  *cgo.Device
	Options measure.Options // Timing is replaced by the suite's
	// Lock, when set, is held for each step: runners that share one device (the emulator has
	// one, and runs one kernel at a time) take turns.
	Lock *sync.Mutex
}

// Run verifies and times one step.
func (r DeviceRunner) Run(step Step, cfg timing.Config) Outcome {
	if r.Lock != nil {
		r.Lock.Lock()
		defer r.Lock.Unlock()
	}
	o := r.Options
	o.Timing = cfg
	var out measure.Outcome
	switch {
	case step.Probe != nil:
		kind, err := cgo.ParseProbeKind(step.Probe.Kind)
		if err != nil {
			return Outcome{Status: StatusFailed, Reason: err.Error()}
		}
		out = measure.Probe(r.Device, measure.ProbeSpec{Kind: kind, Bytes: step.Probe.Bytes, Iterations: step.Probe.Iterations}, o)
	case step.Linear != nil:
		l := step.Linear
		out = measure.Linear(r.Device, measure.LinearSpec{Batch: l.Batch, N: l.N, K: l.K, DType: cgo.DTypeBF16, Variant: cgo.LinearAuto}, o)
	case step.Attention != nil:
		a := step.Attention
		out = measure.Attention(r.Device, measure.AttentionSpec{Batch: a.Batch, QHeads: a.QHeads, KVHeads: a.KVHeads,
			HeadDim: a.HeadDim, Contexts: []int{a.Context}, DType: cgo.DTypeBF16}, o)
	default:
		return Outcome{Status: StatusFailed, Reason: fmt.Sprintf("step %q has nothing to run", step.Name)}
	}
	return fromMeasure(step, out)
}

func fromMeasure(step Step, m measure.Outcome) Outcome {
	o := Outcome{
		Step: step.Name, Kernel: step.String(), Status: m.Status, Reason: m.Reason,
		Bytes: m.Bytes, FLOPs: m.FLOPs,
		MedianSeconds: m.Stats.Median, MinSeconds: m.Stats.Min, Spread: m.Stats.Spread,
		Samples: len(m.Stats.Samples), Converged: m.Stats.Converged,
		BytesPerSec: m.AchievedBytesPerSec, FLOPsPerSec: m.AchievedFLOPsPerSec,
		Verification: Verification{
			Ran: m.Verification.Checked > 0, Passed: m.Verification.Passed,
			RelError: m.Verification.RelError, Tolerance: m.Verification.Tolerance,
		},
		Emulated: m.Emulated,
	}
	if m.Verification.NonFinite > 0 || math.IsNaN(o.Verification.RelError) || math.IsInf(o.Verification.RelError, 0) {
		o.Verification.RelError, o.Verification.NonFinite = 0, true
	}
	if o.Verification.Ran && !o.Verification.Passed && m.Verification.Reason != "" && o.Reason == "" {
		o.Reason = m.Verification.Reason
	}
	return o
}
