package sweep

import (
	"fmt"
	"time"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/telemetry"
	"github.com/decodebench/decodebench/bench/timing"
)

// Statuses of a Measurement and of a Record.
const (
	StatusOK      = "ok"
	StatusFailed  = "failed"  // a kernel failed verification or returned an error
	StatusSkipped = "skipped" // nothing ran: the configuration does not fit, or a kernel refuses the shape
	// StatusNotMeasured marks a kernel of a failed or skipped step that was never run.
	StatusNotMeasured = "not_measured"
)

// Kinds of a Spec: model.KindLinear, model.KindAttention, or a probe of a ceiling.
const KindProbe = "probe"

// Probes the sweep runs first: the measured ceiling is the read bandwidth (what a decode step
// does with its weights and KV cache) and the tensor-core bf16 rate.
const (
	ProbeRead = "read"
	ProbeMMA  = "mma"
)

// Spec is one kernel shape to measure, without the step it came from: two configurations (or
// two layers of one) whose kernels have one Key share one measurement.
type Spec struct {
	Kind  string      `json:"kind"` // model.KindLinear, model.KindAttention or KindProbe
	DType model.DType `json:"dtype"`

	// Linear: Y[M x N] = X[M x K] W^T.
	M int `json:"m,omitempty"`
	N int `json:"n,omitempty"`
	K int `json:"k,omitempty"`

	// Attention: one layer's decode attention over Context cached tokens per sequence.
	Batch   int `json:"batch,omitempty"`
	QHeads  int `json:"q_heads,omitempty"`
	KVHeads int `json:"kv_heads,omitempty"`
	HeadDim int `json:"head_dim,omitempty"`
	Context int `json:"context,omitempty"`

	// Probe: ProbeRead or ProbeMMA, over ProbeBytes of memory (memory probes).
	Probe      string `json:"probe,omitempty"`
	ProbeBytes uint64 `json:"probe_bytes,omitempty"`

	// Bytes and FLOPs of one call as model.Kernel counts them (minimum traffic); for the
	// budget's estimate before anything is measured. Not part of the Key.
	Bytes float64 `json:"bytes"`
	FLOPs float64 `json:"flops"`
}

// SpecOf is the measurement a step's kernel needs.
func SpecOf(k model.Kernel, s model.Shape) Spec {
	spec := Spec{Kind: k.Kind, Bytes: k.Bytes, FLOPs: k.FLOPs}
	switch k.Kind {
	case model.KindLinear:
		spec.DType = s.ActivationDType()
		spec.M, spec.N, spec.K = k.M, k.N, k.K
	case model.KindAttention:
		spec.DType = s.KVDType
		spec.Batch, spec.QHeads, spec.KVHeads, spec.HeadDim, spec.Context = k.Batch, k.QHeads, k.KVHeads, k.HeadDim, k.Context
	}
	return spec
}

// Key identifies the shape: "linear bf16 m=8 n=6144 k=4096", "attention bf16 b=8 q=32 kv=8 d=128
// ctx=4096", "probe read 1073741824 B".
func (s Spec) Key() string {
	switch s.Kind {
	case model.KindLinear:
		return fmt.Sprintf("linear %s m=%d n=%d k=%d", s.DType, s.M, s.N, s.K)
	case model.KindAttention:
		return fmt.Sprintf("attention %s b=%d q=%d kv=%d d=%d ctx=%d", s.DType, s.Batch, s.QHeads, s.KVHeads, s.HeadDim, s.Context)
	case KindProbe:
		if s.ProbeBytes > 0 {
			return fmt.Sprintf("probe %s %d B", s.Probe, s.ProbeBytes)
		}
		return "probe " + s.Probe
	}
	return fmt.Sprintf("%s %+v", s.Kind, s)
}

// Label is a short name for tables and progress: "linear 8x6144x4096", "attention B=8 S=4096".
func (s Spec) Label() string {
	switch s.Kind {
	case model.KindLinear:
		return fmt.Sprintf("linear %dx%dx%d", s.M, s.N, s.K)
	case model.KindAttention:
		return fmt.Sprintf("attention B=%d S=%d", s.Batch, s.Context)
	case KindProbe:
		return s.Probe + " probe"
	}
	return s.Kind
}

// Measurement is one kernel shape measured on the device, a line of kernels.jsonl.
type Measurement struct {
	Key    string `json:"key"`
	Spec   Spec   `json:"spec"`
	Status string `json:"status"` // StatusOK, StatusFailed or StatusSkipped
	Reason string `json:"reason,omitempty"`

	Bytes          float64              `json:"bytes"` // per call, as the measurement counted them
	FLOPs          float64              `json:"flops"`
	Timing         timing.Stats         `json:"timing"` // seconds per call; every sample kept
	AchievedGBps   float64              `json:"achieved_gbps"`
	AchievedTFLOPs float64              `json:"achieved_tflops"`
	RepsPerSample  int                  `json:"reps_per_sample,omitempty"`
	Rotation       measure.Rotation     `json:"rotation"`
	Verification   measure.Verification `json:"verification"`
	Plan           map[string]any       `json:"plan,omitempty"`
	// Emulated: the CPU emulator ran the kernel; Timing is CPU time, never a speed.
	Emulated bool `json:"emulated"`

	Telemetry   telemetry.Summary `json:"telemetry"`
	Started     time.Time         `json:"started"`
	WallSeconds float64           `json:"wall_seconds"` // everything: allocation, verification, timing
}

// OK reports whether the measurement has a time.
func (m Measurement) OK() bool { return m.Status == StatusOK && m.Timing.Median > 0 }

// Measurer measures kernel shapes on one device. bench/measure on a cgo.Device implements it
// (see DeviceMeasurer); tests fake it.
type Measurer interface {
	// Fits says whether the buffers of one call of s can be allocated now, and if not why;
	// it allocates nothing.
	Fits(s Spec) (bool, string)
	// Measure verifies and times s. It fills every field from Status to Emulated; the sweep
	// adds the key, the telemetry and the wall time.
	Measure(s Spec) Measurement
	// Healthy reports whether the device still works after a failure; an error means the
	// CUDA context is lost and the sweep must stop.
	Healthy() error
}
