package step

import (
	"fmt"
	"strings"
	"time"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/roofline"
)

// AllReduceLeftOut is what every record of a tensor-parallel shard says: the step ran one
// GPU's shard, and the all-reduces after attention and after the MLP were not run.
const AllReduceLeftOut = "one GPU's shard: the all-reduces after attention and after the MLP are left out"

// StepTime is one way of getting a step's time (graph, eager or composed) and what it gives.
type StepTime struct {
	Status string `json:"status"` // ok, failed, skipped or not_measured
	Reason string `json:"reason,omitempty"`
	// StepSeconds: one decode step of Batch sequences (the median of the samples for the
	// measured modes; the sum of kernels and bounded small ops for composed).
	StepSeconds float64 `json:"step_seconds,omitzero"`
	// PerRequestTokensPerSec = 1 / StepSeconds; PerServerTokensPerSec = Batch x that.
	PerRequestTokensPerSec float64 `json:"per_request_tokens_per_s,omitzero"`
	PerServerTokensPerSec  float64 `json:"per_server_tokens_per_s,omitzero"`
	// RooflineFraction* = bound / StepSeconds against each ceiling (MBU where the bound is
	// the memory; 1 = at the roofline); 0 where the ceiling is unknown. A zero time, rate or
	// fraction (not measured, unknown) is left out of the JSON, never written as 0.
	RooflineFractionDatasheet float64 `json:"roofline_fraction_datasheet,omitzero"`
	RooflineFractionMeasured  float64 `json:"roofline_fraction_measured,omitzero"`
	// The measured modes only: their samples, how long the host took to queue a step, and
	// what NVML saw.
	Timed *Timed `json:"measured,omitempty"`
}

// OK reports whether the step time is known.
func (t StepTime) OK() bool { return t.Status == measure.StatusOK && t.StepSeconds > 0 }

// Record is one configuration's end-to-end result: a line of steps.jsonl in a sweep's run
// directory, and of `decodebench step --json`. Times are seconds, rates decimal.
type Record struct {
	Key      string `json:"key"` // the sweep configuration key (model, batch, context) and the steps
	Model    string `json:"model"`
	ModelKey string `json:"model_key"`
	Batch    int    `json:"batch"`
	Context  int    `json:"context"` // cached tokens when the first step starts
	Steps    int    `json:"steps"`   // steps in one sample: positions Context .. Context+Steps-1
	DType    string `json:"dtype"`
	TP       int    `json:"tp"`
	// TPNote says what a tensor-parallel shard leaves out (AllReduceLeftOut); empty for TP 1.
	TPNote string `json:"tp_note,omitempty"`

	// WeightFormat is the projections' format as the step ran them ("bf16", "fp8", "int4 g128",
	// "int4-zp g64", "mxfp4"; the embedding, LM head and router stay DType, the activations'),
	// KVDType the caches' ("fp8" for e4m3); WeightBytes and KVBytes what the step holds of
	// each, scales and zero points included (Program.WeightBytes, CacheBytes).
	WeightFormat string `json:"weight_format"`
	KVDType      string `json:"kv_dtype"`
	WeightBytes  uint64 `json:"weight_bytes"`
	KVBytes      uint64 `json:"kv_bytes"`

	// Status is ok when graph or eager has a time and neither failed; Reason then names a mode
	// that was skipped (graph mode on a library without graphs).
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`

	Graph    StepTime `json:"graph"`
	Eager    StepTime `json:"eager"`
	Composed StepTime `json:"composed"` // from the sweep's record of the same configuration

	// The roofline bound of the step (bench/roofline.StepBound at Context, as the composed
	// record has it) against each ceiling.
	BoundSecondsDatasheet float64 `json:"bound_step_seconds_datasheet"`
	BoundSecondsMeasured  float64 `json:"bound_step_seconds_measured"`
	BoundLimit            string  `json:"bound_limit"`

	// LaunchGapSeconds = eager - graph: what launching each op in turn costs over replaying
	// the graph; LaunchGapShare = that over eager (the share of the eager step it is).
	LaunchGapSeconds float64 `json:"launch_gap_seconds"`
	LaunchGapShare   float64 `json:"launch_gap_share"`
	// RunTogetherSeconds = graph - composed: what running the ops together costs over their
	// isolated times (caches left by the previous op, small ops that the composed time only
	// bounds, the gaps a graph still has); RunTogetherShare = that over graph. Negative when
	// the real step beats its parts (an L2 that keeps a small model's weights between ops).
	RunTogetherSeconds float64 `json:"run_together_seconds"`
	RunTogetherShare   float64 `json:"run_together_share"`

	// Verification is how the step was checked against the float64 forward pass before it
	// was timed; a step that failed it has no time (Status failed, the first bad logit).
	Verification Verification `json:"verification"`

	Launches    int      `json:"launches"`     // calls in one eager step
	DeviceBytes uint64   `json:"device_bytes"` // what the step allocated
	Notes       []string `json:"notes,omitempty"`
	// ModesAgree: graph and eager gave the same tokens and logits (null when not compared).
	ModesAgree *bool `json:"modes_agree,omitempty"`
	Throttled  bool  `json:"throttled"`
	Emulated   bool  `json:"emulated"`

	RecordedAt time.Time `json:"recorded_at"`
}

// Key names a configuration's e2e record: the composed record's key and the steps.
func Key(composedKey string, steps int) string { return fmt.Sprintf("%s steps=%d", composedKey, steps) }

// Ceilings are the two roofs the step is held against (an invalid one gives no bound).
type Ceilings struct {
	Datasheet, Measured roofline.Ceiling
}

// NewRecord builds the record of c from what Measure found, the composed step time (its
// status and seconds, from the sweep's record) and the ceilings.
func NewRecord(c Config, composedKey, modelKey string, r Result, composed StepTime, ceil Ceilings) Record {
	s := c.Model
	rec := Record{
		Key: Key(composedKey, c.Steps), Model: s.Name, ModelKey: modelKey, Batch: c.Batch, Context: c.Context, Steps: c.Steps,
		DType: string(s.ActivationDType()), TP: max(s.TP, 1),
		Status: r.Status, Reason: r.Reason, Composed: composed,
		Launches: r.Launches, DeviceBytes: r.DeviceBytes, Notes: r.Notes, ModesAgree: r.ModesAgree, Emulated: r.Emulated,
		Verification: r.Verification,
		RecordedAt:   time.Now().UTC(),
	}
	if rec.TP > 1 {
		rec.TPNote = AllReduceLeftOut
	}
	rec.setFormats(c)
	if !rec.Verification.Verified && rec.Verification.Reason == "" {
		rec.Verification.Reason = strings.TrimSuffix("not run: "+r.Reason, ": ")
	}
	rec.Graph = StepTime{Status: measure.StatusNotMeasured, Reason: "not asked"}
	rec.Eager = rec.Graph
	if (r.Status == measure.StatusSkipped || r.Status == measure.StatusFailed) && len(r.Modes) == 0 {
		rec.Graph.Status, rec.Graph.Reason = r.Status, r.Reason
		rec.Eager = rec.Graph
	}
	for i := range r.Modes {
		t := r.Modes[i]
		st := StepTime{Status: t.Status, Reason: t.Reason, Timed: &t}
		if t.OK() {
			st.StepSeconds = t.Stats.Median
		}
		rec.Throttled = rec.Throttled || t.Telemetry.Throttled
		switch t.Mode {
		case Graph:
			rec.Graph = st
		case Eager:
			rec.Eager = st
		}
	}
	datasheet := roofline.StepBound(s, ceil.Datasheet, c.Batch, c.Context)
	measured := roofline.StepBound(s, ceil.Measured, c.Batch, c.Context)
	rec.BoundSecondsDatasheet, rec.BoundSecondsMeasured = datasheet.StepSeconds, measured.StepSeconds
	rec.BoundLimit = measured.Limit
	if rec.BoundLimit == "" {
		rec.BoundLimit = datasheet.Limit
	}
	rec.checkPlausible(datasheet.WeightBytes + datasheet.KVBytes)
	rec.derive()
	if len(r.Modes) > 0 {
		// ok when a mode has a time and none failed (a mode the library lacks is skipped and
		// said in Reason); failed when any failed or the modes disagree.
		failed := r.ModesAgree != nil && !*r.ModesAgree
		failed = failed || rec.Graph.Status == measure.StatusFailed || rec.Eager.Status == measure.StatusFailed
		switch {
		case failed:
			rec.Status = measure.StatusFailed
		case rec.Graph.OK() || rec.Eager.OK():
			rec.Status = measure.StatusOK
		default:
			rec.Status = measure.StatusSkipped
		}
	}
	return rec
}

// checkPlausible fails a measured mode faster than the datasheet's roofline allows: a timer
// that under-reports or a step that skipped its work, as bench/measure fails such a kernel.
// A step reading under measure.CacheableBytes may have come from a cache, and only a rate past any cache's
// (measure.L2Margin) is refused there.
func (r *Record) checkPlausible(stepBytes float64) {
	if !(r.BoundSecondsDatasheet > 0) {
		return
	}
	margin := measure.PlausibleMargin
	if stepBytes < measure.CacheableBytes {
		margin = measure.L2Margin
	}
	for _, t := range []*StepTime{&r.Graph, &r.Eager} {
		if t.OK() && t.StepSeconds*margin < r.BoundSecondsDatasheet {
			t.Status = measure.StatusFailed
			t.Reason = fmt.Sprintf("%s: %.4g s a step is %.3gx faster than the datasheet's roofline bound of %.4g s", measure.ImplausibleReason,
				t.StepSeconds, r.BoundSecondsDatasheet/t.StepSeconds, r.BoundSecondsDatasheet)
			if t.Timed != nil {
				t.Timed.Status, t.Timed.Reason = t.Status, t.Reason
			}
			r.Reason = strings.Join(append(nonEmpty(r.Reason), string(timedMode(r, t))+": "+t.Reason), "; ")
		}
	}
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// timedMode names which of r's step times t is.
func timedMode(r *Record, t *StepTime) Mode {
	if t == &r.Graph {
		return Graph
	}
	return Eager
}

// derive fills the rates, roofline fractions and gaps from the step times and bounds.
func (r *Record) derive() {
	for _, t := range []*StepTime{&r.Graph, &r.Eager, &r.Composed} {
		t.PerRequestTokensPerSec, t.PerServerTokensPerSec = 0, 0
		t.RooflineFractionDatasheet, t.RooflineFractionMeasured = 0, 0
		if !t.OK() {
			continue
		}
		t.PerRequestTokensPerSec = 1 / t.StepSeconds
		t.PerServerTokensPerSec = float64(r.Batch) / t.StepSeconds
		if r.BoundSecondsDatasheet > 0 {
			t.RooflineFractionDatasheet = r.BoundSecondsDatasheet / t.StepSeconds
		}
		if r.BoundSecondsMeasured > 0 {
			t.RooflineFractionMeasured = r.BoundSecondsMeasured / t.StepSeconds
		}
	}
	r.LaunchGapSeconds, r.LaunchGapShare, r.RunTogetherSeconds, r.RunTogetherShare = 0, 0, 0, 0
	if r.Eager.OK() && r.Graph.OK() {
		r.LaunchGapSeconds = r.Eager.StepSeconds - r.Graph.StepSeconds
		r.LaunchGapShare = r.LaunchGapSeconds / r.Eager.StepSeconds
	}
	if r.Graph.OK() && r.Composed.OK() {
		r.RunTogetherSeconds = r.Graph.StepSeconds - r.Composed.StepSeconds
		r.RunTogetherShare = r.RunTogetherSeconds / r.Graph.StepSeconds
	}
}

// ComposedTime is the composed step of a configuration as a StepTime: ok with its seconds,
// or its status and reason.
func ComposedTime(status, reason string, stepSeconds float64) StepTime {
	t := StepTime{Status: status, Reason: reason}
	if status == measure.StatusOK {
		t.StepSeconds = stepSeconds
	}
	return t
}

// Best is the record's fastest measured step, graph before eager: what the tokens/s charts
// plot as the end-to-end point.
func (r Record) Best() (StepTime, Mode, bool) {
	if r.Graph.OK() {
		return r.Graph, Graph, true
	}
	if r.Eager.OK() {
		return r.Eager, Eager, true
	}
	return StepTime{}, "", false
}
