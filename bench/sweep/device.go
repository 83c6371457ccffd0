package sweep

import (
	"fmt"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/cgo"
)

// DeviceMeasurer measures on a cgo.Device through bench/measure.
type DeviceMeasurer struct {
	Device  *cgo.Device
	Options measure.Options
}

// Fits asks bench/measure whether one copy of the call's buffers fits in free memory.
func (d DeviceMeasurer) Fits(s Spec) (bool, string) {
	var bytes uint64
	switch s.Kind {
	case model.KindLinear:
		ls, err := linearSpec(s)
		if err != nil {
			return true, "" // Measure reports the bad dtype
		}
		bytes = ls.MinDeviceBytes()
	case model.KindAttention:
		as, err := attentionSpec(s)
		if err != nil {
			return true, ""
		}
		bytes = as.MinDeviceBytes()
	case KindProbe:
		bytes = s.ProbeBytes
	}
	if bytes == 0 {
		return true, ""
	}
	return measure.Fits(d.Device, bytes)
}

// Measure verifies and times s.
func (d DeviceMeasurer) Measure(s Spec) Measurement {
	var out measure.Outcome
	switch s.Kind {
	case model.KindLinear:
		ls, err := linearSpec(s)
		if err != nil {
			return Measurement{Status: StatusSkipped, Reason: err.Error()}
		}
		out = measure.Linear(d.Device, ls, d.Options)
	case model.KindAttention:
		as, err := attentionSpec(s)
		if err != nil {
			return Measurement{Status: StatusSkipped, Reason: err.Error()}
		}
		out = measure.Attention(d.Device, as, d.Options)
	case KindProbe:
		kind, err := probeKind(s.Probe)
		if err != nil {
			return Measurement{Status: StatusFailed, Reason: err.Error()}
		}
		out = measure.Probe(d.Device, measure.ProbeSpec{Kind: kind, Bytes: s.ProbeBytes}, d.Options)
	default:
		return Measurement{Status: StatusFailed, Reason: fmt.Sprintf("unknown kernel kind %q", s.Kind)}
	}
	return fromOutcome(out)
}

// Healthy synchronizes the device: a lost CUDA context answers every call with its error.
func (d DeviceMeasurer) Healthy() error { return d.Device.Synchronize() }

func fromOutcome(o measure.Outcome) Measurement {
	return Measurement{
		Status: o.Status, Reason: o.Reason, Bytes: o.Bytes, FLOPs: o.FLOPs, Timing: o.Stats,
		AchievedGBps: o.AchievedBytesPerSec / 1e9, AchievedTFLOPs: o.AchievedFLOPsPerSec / 1e12,
		RepsPerSample: o.RepsPerSample,
		Rotation:      o.Rotation, Verification: o.Verification,
		Plan: o.Plan, Emulated: o.Emulated,
	}
}

// kernelDType is the cgo element type of a model dtype the kernels take.
func kernelDType(d model.DType) (cgo.DType, error) {
	switch d {
	case model.BF16:
		return cgo.DTypeBF16, nil
	case model.FP16:
		return cgo.DTypeFP16, nil
	}
	return 0, fmt.Errorf("unsupported: dtype %s (the kernels take bf16 or fp16)", d)
}

func linearSpec(s Spec) (measure.LinearSpec, error) {
	dt, err := kernelDType(s.DType)
	return measure.LinearSpec{Batch: s.M, N: s.N, K: s.K, DType: dt, Variant: cgo.LinearAuto}, err
}

func attentionSpec(s Spec) (measure.AttentionSpec, error) {
	dt, err := kernelDType(s.DType)
	return measure.AttentionSpec{Batch: s.Batch, QHeads: s.QHeads, KVHeads: s.KVHeads, HeadDim: s.HeadDim,
		Contexts: []int{s.Context}, DType: dt}, err
}

func probeKind(name string) (cgo.ProbeKind, error) {
	switch name {
	case ProbeRead:
		return cgo.ProbeRead, nil
	case ProbeMMA:
		return cgo.ProbeMMABF16, nil
	}
	return 0, fmt.Errorf("unknown probe %q (want %s or %s)", name, ProbeRead, ProbeMMA)
}
