// Package validate gives a GPU box its production verdict: is every card healthy (NVML), does
// every kernel compute the right answer on it, and does every card decode as fast as its kind
// should (performance gates against bench/roofline's datasheet rows and the card's own measured
// ceiling) and as fast as its identical peers (outliers). Every finding is a Check with a
// verdict, the measured value, the threshold and a sentence a technician can act on; a Report
// holds them with the identity of every card and the box, and Fleet reads many Reports.
//
// The logic here is plain Go over small inputs (gpuinfo.Health, telemetry samples, kernel
// Outcomes), so tests feed it go-nvml mocks and synthetic measurements. Run wires it to NVML
// and to a Runner that launches kernels.
package validate

import (
	"fmt"
	"math"
)

// Verdict is a check's, a card's, a box's or a fleet's result. The order PASS < WARN < FAIL is
// the order of severity: a whole takes its worst part's verdict.
type Verdict string

const (
	Pass Verdict = "PASS" // within its threshold
	Warn Verdict = "WARN" // worth a look, but not a reason to keep the card out of production
	Fail Verdict = "FAIL" // keep the card (or box) out of production until fixed
	// Skip is a check that could not run: its step was not started before the suite's budget
	// ran out, or the backend cannot measure it (the emulator has no speed). As DCGM's Skip, it
	// says nothing about the hardware: checks carry it, and it counts as PASS towards a card's
	// or a box's verdict (which never is SKIP), so a budget overrun is never a FAIL.
	Skip Verdict = "SKIP"
	// Interrupted is the verdict of a box (and of its cards cut short) when validate was
	// stopped (SIGINT, or SIGTERM as scancel and Kubernetes send) before it reached one: no
	// verdict on the hardware at all. Checks never carry it.
	Interrupted Verdict = "INTERRUPTED"
	// Incomplete is a fleet's verdict when no card fails but some box gave no verdict: its
	// validate was interrupted or its report cannot be read.
	Incomplete Verdict = "INCOMPLETE"
)

func (v Verdict) rank() int {
	switch v {
	case Pass, Skip:
		return 0
	case Warn:
		return 1
	}
	return 2 // FAIL, and anything unknown counts as a failure
}

// Valid reports whether v is PASS, WARN or FAIL: a verdict on hardware (SKIP is none).
func (v Verdict) Valid() bool { return v == Pass || v == Warn || v == Fail }

// Worst is the most severe of vs; PASS for none.
func Worst(vs ...Verdict) Verdict {
	w := Pass
	for _, v := range vs {
		if v.rank() > w.rank() {
			w = v
		}
	}
	return w
}

// Categories of checks.
const (
	CategoryHealth      = "health"      // NVML: memory errors, PCIe, thermal, power, other users
	CategoryCorrectness = "correctness" // a kernel's output against bench/ref
	CategoryPerformance = "performance" // a performance gate
	CategoryOutlier     = "outlier"     // a card against the median of its identical peers
	CategoryBox         = "box"         // the box as a whole: GPU count, NVML, kinds
)

// Check is one finding. Value and Threshold are numbers in Unit when the check has them;
// ValueText and ThresholdText say the same in words ("gen5 x16") for checks whose values are
// not one number. Compare is how Value is held against Threshold: ">=" or "<=".
type Check struct {
	ID            string   `json:"id"` // "health.ecc", "performance.read_bandwidth", ...
	Category      string   `json:"category"`
	Verdict       Verdict  `json:"verdict"`
	Value         *float64 `json:"value,omitempty"`
	Threshold     *float64 `json:"threshold,omitempty"`
	Compare       string   `json:"compare,omitempty"`
	Unit          string   `json:"unit,omitempty"`
	ValueText     string   `json:"value_text,omitempty"`
	ThresholdText string   `json:"threshold_text,omitempty"`
	Message       string   `json:"message"` // one sentence for a technician: what, and what to do
}

// num returns a pointer to x for Check.Value and Check.Threshold, or nil when x is NaN or
// infinite (JSON has no such numbers; the message says what happened instead).
func num(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return &x
}

// newCheck builds a check without numbers.
func newCheck(id, category string, v Verdict, format string, a ...any) Check {
	return Check{ID: id, Category: category, Verdict: v, Message: fmt.Sprintf(format, a...)}
}

// Counts is how many checks (or cards) gave each verdict.
type Counts struct {
	Pass int `json:"pass"`
	Warn int `json:"warn"`
	Fail int `json:"fail"`
	Skip int `json:"skip"` // checks that could not run (cards are never SKIP)
}

// Total is the number counted.
func (c Counts) Total() int { return c.Pass + c.Warn + c.Fail + c.Skip }

func (c *Counts) add(v Verdict) {
	switch v {
	case Pass:
		c.Pass++
	case Skip:
		c.Skip++
	case Warn:
		c.Warn++
	default:
		c.Fail++
	}
}

// CountChecks counts checks by verdict.
func CountChecks(checks []Check) Counts {
	var c Counts
	for _, ch := range checks {
		c.add(ch.Verdict)
	}
	return c
}

// verdictOf is the worst verdict among checks.
func verdictOf(checks []Check) Verdict {
	w := Pass
	for _, c := range checks {
		w = Worst(w, c.Verdict)
	}
	return w
}
