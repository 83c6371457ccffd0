package measure

import (
	"encoding/json"
	"math"

	"github.com/decodebench/decodebench/bench/timing"
)

// The status words of a measurement: of an Outcome, and of what is composed from outcomes (a
// sweep's kernel entries and records, validate's steps).
const (
	StatusOK      = "ok"
	StatusFailed  = "failed"  // verification failed, the time is implausible, or the kernel or the device returned an error
	StatusSkipped = "skipped" // the shape does not fit or is not supported: nothing ran
	// StatusNotMeasured marks a kernel of a failed or skipped step that was never run.
	StatusNotMeasured = "not_measured"
)

// Rotation says how the timed samples kept their operands out of L2.
type Rotation struct {
	Copies          int     `json:"copies"` // copies of the rotated operands (weights, KV caches), one per call in turn
	WorkingSetBytes float64 `json:"working_set_bytes"`
	L2Bytes         float64 `json:"l2_bytes"`
	Method          string  `json:"method"` // e.g. "rotate 12 copies, 1.21 GB working set = 19x L2 (62.9 MB)"
}

// Verification is the check that came before the timing.
type Verification struct {
	Passed bool `json:"passed"`
	// RelError is ‖out−ref‖₂/‖ref‖₂ over the elements checked against the reference; it is
	// always finite. With NonFinite > 0 no error is defined: RelError is 0 and JSON has null.
	RelError  float64 `json:"rel_error"`
	Tolerance float64 `json:"tolerance"`
	Checked   int     `json:"checked"` // elements (or words, or values) compared against the reference
	// NonFinite counts the outputs that were NaN or infinite (0xFF poison of an unwritten
	// output reads as NaN).
	NonFinite int    `json:"non_finite,omitempty"`
	Reason    string `json:"reason,omitempty"` // why it failed, or what was sampled
}

// verificationJSON is Verification with a rel_error that can be null.
type verificationJSON struct {
	Passed    bool     `json:"passed"`
	RelError  *float64 `json:"rel_error"`
	Tolerance float64  `json:"tolerance"`
	Checked   int      `json:"checked"`
	NonFinite int      `json:"non_finite,omitempty"`
	Reason    string   `json:"reason,omitempty"`
}

// MarshalJSON writes rel_error null when it is undefined (non-finite outputs, or a
// non-finite error), so that a failed verification can always be recorded.
func (v Verification) MarshalJSON() ([]byte, error) {
	j := verificationJSON{Passed: v.Passed, Tolerance: finiteOr0(v.Tolerance), Checked: v.Checked, NonFinite: v.NonFinite, Reason: v.Reason}
	if v.NonFinite == 0 && isFinite(v.RelError) {
		e := v.RelError
		j.RelError = &e
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads a null rel_error as 0.
func (v *Verification) UnmarshalJSON(data []byte) error {
	var j verificationJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*v = Verification{Passed: j.Passed, Tolerance: j.Tolerance, Checked: j.Checked, NonFinite: j.NonFinite, Reason: j.Reason}
	if j.RelError != nil {
		v.RelError = *j.RelError
	}
	return nil
}

func isFinite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

func finiteOr0(x float64) float64 {
	if isFinite(x) {
		return x
	}
	return 0
}

// Outcome is one measurement: what was asked, how it went, what it found.
type Outcome struct {
	Spec   Spec   `json:"spec"`
	Kernel string `json:"kernel"` // "linear", "attention", "probe:read", ...
	Status string `json:"status"` // StatusOK, StatusFailed or StatusSkipped
	Reason string `json:"reason,omitempty"`

	// Bytes and FLOPs are the minimum per call: each input read once, each output written once.
	Bytes float64      `json:"bytes"`
	FLOPs float64      `json:"flops"`
	Stats timing.Stats `json:"timing"` // per-call seconds
	// From the median: Bytes / median and FLOPs / median, in B/s and FLOP/s.
	AchievedBytesPerSec float64      `json:"achieved_bytes_per_s"`
	AchievedFLOPsPerSec float64      `json:"achieved_flops_per_s"`
	RepsPerSample       int          `json:"reps_per_sample,omitempty"` // calls timed back to back in one sample
	Rotation            Rotation     `json:"rotation"`
	Verification        Verification `json:"verification"`
	Plan                Plan         `json:"plan"`
	// Emulated: the kernels ran in the CPU emulator; Stats are CPU time and say nothing about
	// any GPU. Never report them as speed.
	Emulated bool `json:"emulated"`
}

// Plan is what the kernel's planner resolved, and how the timing went. The JSON names are
// those of kernels.jsonl's "plan" (and of bench's records); a field a kernel has no use for
// is left out.
type Plan struct {
	Variant        string `json:"variant,omitempty"` // the kernel that ran: gemv, mma, simt, ...
	SplitK         int    `json:"split_k,omitempty"` // linear
	Layout         string `json:"layout,omitempty"`  // attention: contiguous or paged
	PageSize       int    `json:"page_size,omitempty"`
	Splits         int    `json:"splits,omitempty"`       // attention: KV splits per sequence
	SplitTokens    int    `json:"split_tokens,omitempty"` // tokens of one split
	WorkspaceBytes uint64 `json:"workspace_bytes,omitempty"`
	BufferBytes    uint64 `json:"buffer_bytes,omitempty"` // memory probes: bytes of each buffer
	Words          uint64 `json:"words,omitempty"`        // memory probes: 4-byte words of each buffer
	Iterations     int    `json:"iterations,omitempty"`   // compute probes: loop trips per thread
	Blocks         int    `json:"blocks,omitempty"`       // probes: the launch shape
	Threads        int    `json:"threads,omitempty"`
	Timer          string `json:"timer,omitempty"` // how the samples were held behind the host
}
