package validate

import (
	"fmt"
	"math"

	"github.com/decodebench/decodebench/bench/measure"
)

// Verification is a kernel's output held against the float64 reference (bench/ref).
type Verification struct {
	Ran    bool `json:"ran"`
	Passed bool `json:"passed"`
	// RelError is the relative error over the elements checked; when the output held NaN or
	// infinite values it is 0 and NonFinite is set (JSON has no NaN).
	RelError  float64 `json:"rel_error"`
	NonFinite bool    `json:"non_finite,omitempty"`
	Tolerance float64 `json:"tolerance"`
}

// Outcome is the report's record of one step's measurement on one card: a measure.Outcome in
// the names of the report's schema (docs/validate-schema.md), which readers of v1 reports rely
// on; newOutcome is the one place that writes it.
type Outcome struct {
	Step   string `json:"step"`
	Kernel string `json:"kernel"` // what ran, in words
	Status string `json:"status"` // measure.StatusOK, measure.StatusFailed or measure.StatusSkipped
	Reason string `json:"reason,omitempty"`

	// Bytes and FLOPs are the minimum one call must move and do (decimal units).
	Bytes float64 `json:"bytes"`
	FLOPs float64 `json:"flops"`
	// Timing of one call, in seconds: the median and the spread (Q3 - Q1) / median.
	MedianSeconds float64 `json:"median_seconds"`
	MinSeconds    float64 `json:"min_seconds"`
	Spread        float64 `json:"spread"`
	Samples       int     `json:"samples"`
	Converged     bool    `json:"converged"` // the spread fell under the target before the timeout
	// Rates at the median time.
	BytesPerSec float64 `json:"bytes_per_s"`
	FLOPsPerSec float64 `json:"flops_per_s"`

	Verification Verification `json:"verification"`
	Emulated     bool         `json:"emulated"` // timed on the emulator: no speed
}

// newOutcome records step's measurement m. A verification that saw NaN or infinite outputs has
// no relative error: 0 and NonFinite. A failed verification's reason stands in for an outcome
// that gives none.
func newOutcome(step Step, m measure.Outcome) Outcome {
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

// skipped reports whether the step did not run for a reason that is no fault of the card: the
// suite's budget ran out, the backend cannot run its shape, or validate was interrupted.
func (o Outcome) skipped() bool { return o.Status == measure.StatusSkipped }

// ok reports whether the step was measured.
func (o Outcome) ok() bool { return o.Status == measure.StatusOK && o.MedianSeconds > 0 }

// why says why a step gave no measurement.
func (o Outcome) why() string {
	switch {
	case o.Status == "":
		return "it did not run"
	case o.Reason != "":
		return o.Reason
	case o.Status == measure.StatusOK:
		return "it gave no time"
	}
	return "it " + o.Status
}

// CorrectnessChecks gives each step that ran a check of its verification: the relative error
// against the tolerance. A step whose kernel failed before it could be verified fails here too.
func CorrectnessChecks(outcomes []Outcome) []Check {
	var checks []Check
	for _, o := range outcomes {
		id := "correctness." + o.Step
		v := o.Verification
		switch {
		case o.Status == measure.StatusSkipped && !v.Ran:
			checks = append(checks, newCheck(id, CategoryCorrectness, Skip,
				"The %s was not run (%s), so it was not verified.", o.Kernel, o.why()))
		case !v.Ran && o.Status == measure.StatusFailed:
			checks = append(checks, newCheck(id, CategoryCorrectness, Fail,
				"The %s failed before its output could be checked: %s. Run `decodebench verify` on this card to look closer; a kernel that fails on one card only points at the card.", o.Kernel, o.why()))
		case !v.Ran:
			checks = append(checks, newCheck(id, CategoryCorrectness, Warn,
				"The %s ran but its output was not checked against the reference.", o.Kernel))
		default:
			c := Check{ID: id, Category: CategoryCorrectness, Value: num(v.RelError), Threshold: num(v.Tolerance), Compare: "<=", Unit: "relative error"}
			if v.NonFinite {
				c.Value, c.ValueText = nil, "NaN or infinite output"
			}
			if v.Passed {
				c.Verdict = Pass
				c.Message = fmt.Sprintf("The %s matches the float64 reference (relative error %.2g, tolerance %.2g).", o.Kernel, v.RelError, v.Tolerance)
			} else {
				c.Verdict = Fail
				errText := fmt.Sprintf("%.3g", v.RelError)
				if v.NonFinite || math.IsNaN(v.RelError) || math.IsInf(v.RelError, 0) {
					errText = "NaN or infinite output"
				}
				c.Message = fmt.Sprintf("The %s computed wrong results on this card (relative error %s, tolerance %.2g): suspect the card's memory or compute; reset it and run again, and keep it out of production until it passes.", o.Kernel, errText, v.Tolerance)
			}
			checks = append(checks, c)
		}
	}
	return checks
}
