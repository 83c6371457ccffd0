package sweep

import (
	"encoding/json"
	"time"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/telemetry"
	"github.com/decodebench/decodebench/cgo"
)

// SpecOf is the measurement a step's kernel needs: two configurations (or two layers of one)
// whose kernels have one Key share one measurement. A dtype the kernels do not take maps to
// no cgo dtype, and the measurement says so (skipped).
func SpecOf(k model.Kernel, s model.Shape) measure.Spec {
	switch k.Kind {
	case model.KindLinear:
		return measure.LinearSpec{Batch: k.M, N: k.N, K: k.K, DType: kernelDType(s.ActivationDType()), Variant: cgo.LinearAuto}.Spec()
	case model.KindAttention:
		return measure.AttentionSpec{Batch: k.Batch, QHeads: k.QHeads, KVHeads: k.KVHeads, HeadDim: k.HeadDim,
			Contexts: []int{k.Context}, DType: kernelDType(s.KVDType)}.Spec()
	}
	return measure.Spec{Kind: k.Kind}
}

// kernelDType is the cgo element type of a model dtype the kernels take (-1 for another).
func kernelDType(d model.DType) cgo.DType {
	switch d {
	case model.BF16:
		return cgo.DTypeBF16
	case model.FP16:
		return cgo.DTypeFP16
	}
	return -1
}

// The probes the sweep runs first: the measured ceiling is the read bandwidth (what a decode
// step does with its weights and KV cache) and the tensor-core bf16 rate.
func readProbe(bytes uint64) measure.Spec {
	return measure.ProbeSpec{Kind: cgo.ProbeRead, Bytes: bytes}.Spec()
}
func mmaProbe() measure.Spec { return measure.ProbeSpec{Kind: cgo.ProbeMMABF16}.Spec() }

// Measurement is one kernel call measured on the device, a line of kernels.jsonl: the
// measure.Outcome and where and when the sweep took it.
type Measurement struct {
	Key string `json:"key"` // Outcome.Spec.Key(): what a resume and the records match
	measure.Outcome
	Telemetry   telemetry.Summary `json:"telemetry"`
	Started     time.Time         `json:"started"`
	WallSeconds float64           `json:"wall_seconds"` // everything: allocation, verification, timing
}

// UnmarshalJSON also reads the lines of earlier decodebench versions, whose rates were
// achieved_gbps and achieved_tflops (decimal GB/s and TFLOP/s) and whose spec was flat (it is
// left empty: the key still names the call).
func (m *Measurement) UnmarshalJSON(data []byte) error {
	type plain Measurement
	var v struct {
		plain
		Spec   json.RawMessage `json:"spec"`
		GBps   float64         `json:"achieved_gbps"`
		TFLOPs float64         `json:"achieved_tflops"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*m = Measurement(v.plain)
	if len(v.Spec) > 0 && json.Unmarshal(v.Spec, &m.Spec) != nil {
		m.Spec = measure.Spec{}
	}
	if m.AchievedBytesPerSec == 0 && v.GBps > 0 {
		m.AchievedBytesPerSec = v.GBps * 1e9
	}
	if m.AchievedFLOPsPerSec == 0 && v.TFLOPs > 0 {
		m.AchievedFLOPsPerSec = v.TFLOPs * 1e12
	}
	return nil
}

// OK reports whether the measurement has a time.
func (m Measurement) OK() bool { return m.Status == measure.StatusOK && m.Stats.Median > 0 }

// Measurer measures kernel calls on one device. bench/measure on a cgo.Device implements it
// (see DeviceMeasurer); tests fake it.
type Measurer interface {
	// Fits says whether the buffers of one call of s can be allocated now, and if not why;
	// it allocates nothing.
	Fits(s measure.Spec) (bool, string)
	// Measure verifies and times s.
	Measure(s measure.Spec) measure.Outcome
	// Healthy reports whether the device still works after a failure; an error means the
	// CUDA context is lost and the sweep must stop.
	Healthy() error
}
