package validate

import (
	"fmt"

	"github.com/decodebench/decodebench/bench/roofline"
)

// Units of the gates' values.
const (
	UnitBytesPerSec  = "B/s"
	UnitFLOPsPerSec  = "FLOP/s"
	UnitTokensPerSec = "tokens/s"
)

// GateValue is one gate's measurement on one card, kept in the report for the fleet: the
// value, what it was held against, and the verdict.
type GateValue struct {
	Gate  string  `json:"gate"`
	Value float64 `json:"value"` // 0 when not measured
	Unit  string  `json:"unit"`
	// Reference is what the fraction is of: a datasheet figure, the card's measured read
	// bandwidth or the roofline bound (0 when unknown), named by ReferenceName.
	Reference     float64 `json:"reference"`
	ReferenceName string  `json:"reference_name"`
	Fraction      float64 `json:"fraction"` // Value / Reference; 0 when either is unknown
	// Required is the least passing Value (MinValue, or MinFraction x Reference); 0 when the
	// gate could not be evaluated.
	Required         float64 `json:"required"`
	RequiredFraction float64 `json:"required_fraction,omitempty"`
	Verdict          Verdict `json:"verdict"`
	Emulated         bool    `json:"emulated,omitempty"`
}

// CardKind is what the gates need to know about a card besides its measurements: its spec row
// (nil when bench/roofline has none) and the datasheet bandwidth NVML implies (memory clock x
// bus width x 2; 0 when unknown), which stands in for a missing row's.
type CardKind struct {
	Spec                     *roofline.GPU
	NVMLBandwidthBytesPerSec float64
}

// gateInput is one gate before its verdict.
type gateInput struct {
	gate, unit, label string
	value             float64
	measured          bool
	skipped           bool   // not measured, for no fault of the card (Outcome.skipped): SKIP, not FAIL
	why               string // why there is no value
	reference         float64
	referenceName     string
	noReference       string // why there is no reference, when there is none
	advice            string // what to do when it fails
}

// PerformanceChecks evaluates the five gates from a card's outcomes (by step name) and returns
// a check and a GateValue for each.
func PerformanceChecks(kind CardKind, suite Suite, plan Plan, outcomes map[string]Outcome, t Thresholds) ([]Check, []GateValue) {
	get := func(step string) Outcome { return outcomes[step] }
	read, tensor := get(StepRead), get(StepTensor)

	var datasheetBW float64
	var datasheetName string
	switch {
	case kind.Spec != nil:
		datasheetBW = kind.Spec.BandwidthBytesPerSec
		datasheetName = fmt.Sprintf("the %s datasheet bandwidth of %s", FormatValue(datasheetBW, UnitBytesPerSec), kind.Spec.Key)
	case kind.NVMLBandwidthBytesPerSec > 0:
		datasheetBW = kind.NVMLBandwidthBytesPerSec
		datasheetName = fmt.Sprintf("the %s that NVML's memory clock and bus width imply", FormatValue(datasheetBW, UnitBytesPerSec))
	}
	noRow := "bench/roofline has no row for this card; name its kind with --expect GPU, or give %s.min_value in a thresholds file"
	inputs := []gateInput{{
		gate: GateReadBandwidth, unit: UnitBytesPerSec, label: "Read bandwidth", noReference: fmt.Sprintf(noRow, GateReadBandwidth),
		value: read.BytesPerSec, measured: read.ok(), skipped: read.skipped(), why: read.why(),
		reference: datasheetBW, referenceName: datasheetName,
		advice: "check the memory clock (nvidia-smi -q -d CLOCK) and the throttling and power checks, reset the GPU and run again; if it stays slow, its memory is underperforming (RMA)",
	}}

	tensorIn := gateInput{
		gate: GateTensor, unit: UnitFLOPsPerSec, label: "Tensor-core rate", noReference: fmt.Sprintf(noRow, GateTensor),
		value: tensor.FLOPsPerSec, measured: tensor.ok(), skipped: tensor.skipped(), why: tensor.why(),
		advice: "check the SM clock (nvidia-smi -q -d CLOCK), the power limit and the throttling check, reset the GPU and run again",
	}
	if kind.Spec != nil {
		tensorIn.reference = kind.Spec.TensorBF16FLOPs
		tensorIn.referenceName = fmt.Sprintf("the %s dense bf16 datasheet rate of %s", FormatValue(tensorIn.reference, UnitFLOPsPerSec), kind.Spec.Key)
	}
	inputs = append(inputs, tensorIn)

	measuredRead := read.ok() && read.BytesPerSec > 0
	measuredName, noMeasured := "", ""
	if measuredRead {
		measuredName = fmt.Sprintf("the %s this card's read probe measured", FormatValue(read.BytesPerSec, UnitBytesPerSec))
	} else {
		noMeasured = fmt.Sprintf("the read probe measured no bandwidth to hold it against (%s)", read.why())
		if read.ok() {
			noMeasured = "the read probe measured no bandwidth to hold it against"
		}
	}
	kernelAdvice := "if every card of this kind fails here, the threshold (or the kernel) is wrong rather than the cards; otherwise reset the GPU and run again"
	for _, g := range []struct{ gate, step, label string }{
		{GateLinearBatch1, StepLinearBatch1, "Batch-1 decode linear"},
		{GateAttentionLong, StepAttentionLong, "Long-context decode attention"},
	} {
		o := get(g.step)
		in := gateInput{gate: g.gate, unit: UnitBytesPerSec, label: g.label, value: o.BytesPerSec, measured: o.ok(), skipped: o.skipped(), why: o.why(),
			advice: kernelAdvice, noReference: noMeasured}
		if measuredRead {
			in.reference, in.referenceName = read.BytesPerSec, measuredName
		}
		inputs = append(inputs, in)
	}
	inputs = append(inputs, modelStepInput(kind, suite, plan, outcomes))

	emulated := false
	for _, o := range outcomes {
		emulated = emulated || o.Emulated
	}
	var checks []Check
	var values []GateValue
	for _, in := range inputs {
		c, gv := evaluateGate(in, t.Gate(in.gate), emulated)
		checks = append(checks, c)
		values = append(values, gv)
	}
	return checks, values
}

// modelStepInput adds up the reference step: each model kernel's median time x its repeats.
// The small per-token ops (norms, rotary, ...) are left out here, unlike a sweep's
// step, and the bound counts the embedding row and norm weights they read: both under 0.1% of a
// Llama-3-8B step's bytes, so the comparison is like with like to that precision.
func modelStepInput(kind CardKind, suite Suite, plan Plan, outcomes map[string]Outcome) gateInput {
	in := gateInput{gate: GateModelStep, unit: UnitTokensPerSec, label: fmt.Sprintf("%s batch-1 decode step at context %d", suite.Model.Name, suite.ModelContext),
		measured:    true,
		noReference: fmt.Sprintf("bench/roofline has no row for this card; name its kind with --expect GPU, or give %s.min_value in a thresholds file", GateModelStep),
		advice:      "see which of the gates above failed; if none did, a small kernel of the step is slow on this card: reset it and run again"}
	stepSeconds := 0.0
	// A kernel that failed fails the step; one only skipped (and none failed) skips it.
	failed, skipped := "", ""
	for _, k := range plan.ModelKernels {
		o := outcomes[k.Step]
		if o.ok() {
			stepSeconds += k.Repeat * o.MedianSeconds
			continue
		}
		why := fmt.Sprintf("its %s kernel was not measured: %s", k.Kernel, o.why())
		switch {
		case o.skipped() && skipped == "":
			skipped = why
		case !o.skipped() && failed == "":
			failed = why
		}
	}
	switch {
	case failed != "":
		in.measured, in.why = false, failed
	case skipped != "":
		in.measured, in.skipped, in.why = false, true, skipped
	}
	if in.measured && stepSeconds > 0 {
		in.value = 1 / stepSeconds
	}
	if kind.Spec != nil {
		b := roofline.StepBound(suite.Model, roofline.DatasheetCeiling(*kind.Spec), 1, suite.ModelContext)
		in.reference = b.PerRequestTokensPerSec
		in.referenceName = fmt.Sprintf("the %s roofline bound on %s's datasheet ceilings", FormatValue(in.reference, UnitTokensPerSec), kind.Spec.Key)
	}
	return in
}

func evaluateGate(in gateInput, th GateThreshold, emulated bool) (Check, GateValue) {
	id := "performance." + in.gate
	gv := GateValue{Gate: in.gate, Unit: in.unit, Reference: in.reference, ReferenceName: in.referenceName, Emulated: emulated}
	if in.measured {
		gv.Value = in.value
		if in.reference > 0 {
			gv.Fraction = in.value / in.reference
		}
	}
	switch {
	case th.MinValue > 0:
		gv.Required = th.MinValue
	case in.reference > 0:
		gv.Required, gv.RequiredFraction = th.MinFraction*in.reference, th.MinFraction
	}
	c := Check{ID: id, Category: CategoryPerformance, Unit: in.unit, Compare: ">="}
	if in.measured {
		c.Value = num(in.value)
	}
	if gv.Required > 0 {
		c.Threshold = num(gv.Required)
	}
	need := ""
	if gv.RequiredFraction > 0 {
		need = fmt.Sprintf("needs %.0f%% (%s)", 100*gv.RequiredFraction, FormatValue(gv.Required, in.unit))
	} else if gv.Required > 0 {
		need = "needs " + FormatValue(gv.Required, in.unit)
	}
	switch {
	case !in.measured && in.skipped:
		c.Verdict = Skip
		c.Message = fmt.Sprintf("%s: not measured (%s); the gate was not evaluated, which says nothing about the card.", in.label, in.why)
	case !in.measured:
		c.Verdict = Fail
		c.Message = fmt.Sprintf("%s: not measured (%s).", in.label, in.why)
	case emulated:
		c.Verdict = Skip
		c.Message = fmt.Sprintf("%s: %s on the emulated backend, which is no speed; the gate was not evaluated. Run on the GPU (--backend cuda) to validate performance.", in.label, FormatValue(in.value, in.unit))
	case gv.Required <= 0 && in.reference <= 0:
		c.Verdict = Warn
		c.Message = fmt.Sprintf("%s: %s, but there is nothing to hold it against: %s.", in.label, FormatValue(in.value, in.unit), in.noReference)
	default:
		of := ""
		if gv.Fraction > 0 {
			of = fmt.Sprintf(" is %.1f%% of %s", 100*gv.Fraction, in.referenceName)
		}
		if in.value >= gv.Required {
			c.Verdict = Pass
			c.Message = fmt.Sprintf("%s %s%s; %s.", in.label, FormatValue(in.value, in.unit), of, need)
		} else {
			c.Verdict = Fail
			c.Message = fmt.Sprintf("%s %s%s, too slow: %s. %s.", in.label, FormatValue(in.value, in.unit), of, need, capitalize(in.advice))
		}
	}
	gv.Verdict = c.Verdict
	return c, gv
}

func capitalize(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// FormatValue prints a gate's value in a readable decimal unit.
func FormatValue(v float64, unit string) string {
	switch unit {
	case UnitBytesPerSec:
		if v >= 1e12 {
			return fmt.Sprintf("%.2f TB/s", v/1e12)
		}
		if v >= 1e9 {
			return fmt.Sprintf("%.1f GB/s", v/1e9)
		}
		return fmt.Sprintf("%.3g MB/s", v/1e6)
	case UnitFLOPsPerSec:
		if v >= 1e12 {
			return fmt.Sprintf("%.0f TFLOP/s", v/1e12)
		}
		return fmt.Sprintf("%.3g GFLOP/s", v/1e9)
	case UnitTokensPerSec:
		return fmt.Sprintf("%.1f tokens/s", v)
	}
	return fmt.Sprintf("%.4g %s", v, unit)
}
