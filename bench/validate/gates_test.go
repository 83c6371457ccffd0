package validate

import (
	"math"
	"testing"

	"github.com/decodebench/decodebench/bench/measure"
)

func TestGatesOnAGoodH100(t *testing.T) {
	s := standard(t)
	plan, out := runSuite(t, s, goodH100())
	checks, gates := PerformanceChecks(CardKind{Spec: gpuRow(t, "h100-sxm")}, s, plan, out, DefaultThresholds())
	if len(checks) != len(Gates) || len(gates) != len(Gates) {
		t.Fatalf("%d checks and %d gate values, want %d", len(checks), len(gates), len(Gates))
	}
	for i, c := range checks {
		if c.Verdict != Pass {
			t.Errorf("%s: %s: %s", c.ID, c.Verdict, c.Message)
		}
		if c.ID != "performance."+Gates[i] || gates[i].Gate != Gates[i] {
			t.Errorf("check %d is %s / %s, want %s", i, c.ID, gates[i].Gate, Gates[i])
		}
		if c.Value == nil || c.Threshold == nil || *c.Value < *c.Threshold {
			t.Errorf("%s: value %v threshold %v", c.ID, c.Value, c.Threshold)
		}
	}
	read := gates[0]
	if math.Abs(read.Fraction-0.92) > 1e-9 || read.Required != 0.85*3.35e12 || read.Reference != 3.35e12 {
		t.Errorf("read gate = %+v, want 92%% of 3.35 TB/s against 85%%", read)
	}
	expect(t, checks[0], Pass, "3.08 TB/s", "92.0% of the 3.35 TB/s datasheet bandwidth of h100-sxm", "needs 85% (2.85 TB/s)")
	// The linear gate is against the measured read bandwidth, not the datasheet.
	if lin := gates[2]; math.Abs(lin.Fraction-0.90) > 1e-9 || lin.Reference != 0.92*3.35e12 {
		t.Errorf("linear gate = %+v, want 90%% of the measured read bandwidth", lin)
	}
	// Every kernel at ~0.92 x 0.9 of the datasheet: the step reaches about 0.83 of its bound
	// (a little more: the bound also counts the embedding row and norms, which no kernel reads).
	if m := gates[4]; m.Fraction < 0.80 || m.Fraction > 0.86 || m.Unit != UnitTokensPerSec {
		t.Errorf("model step gate = %+v, want about 83%% of the bound in tokens/s", m)
	}
}

func TestGateFailures(t *testing.T) {
	s := standard(t)
	h100 := CardKind{Spec: gpuRow(t, "h100-sxm")}
	tests := []struct {
		desc      string
		runner    synthRunner
		kind      CardKind
		th        func(*Thresholds)
		gate      string
		verdict   Verdict
		fragments []string
	}{
		{"slow memory", synthRunner{readBW: 0.80 * 3.35e12, linearEff: 0.9, attnEff: 0.85, tensorRate: 8e14}, h100, nil,
			GateReadBandwidth, Fail, []string{"2.68 TB/s is 80.0%", "too slow", "needs 85%", "RMA"}},
		{"slow tensor cores", synthRunner{readBW: 3.1e12, linearEff: 0.9, attnEff: 0.85, tensorRate: 0.6 * 989.4e12}, h100, nil,
			GateTensor, Fail, []string{"60.0% of the 989 TFLOP/s dense bf16 datasheet rate", "needs 70%"}},
		{"a slow linear kernel", synthRunner{readBW: 3.1e12, linearEff: 0.7, attnEff: 0.85, tensorRate: 8e14}, h100, nil,
			GateLinearBatch1, Fail, []string{"70.0% of the 3.10 TB/s this card's read probe measured", "needs 80%"}},
		{"slow long-context attention", synthRunner{readBW: 3.1e12, linearEff: 0.9, attnEff: 0.6, tensorRate: 8e14}, h100, nil,
			GateAttentionLong, Fail, []string{"60.0%", "needs 75%"}},
		{"a slow reference step", synthRunner{readBW: 3.1e12, linearEff: 0.6, attnEff: 0.85, tensorRate: 8e14}, h100, nil,
			GateModelStep, Fail, []string{"Llama-3-8B batch-1 decode step at context 4096", "roofline bound on h100-sxm", "needs 60%"}},
		{"a thresholds file that asks for less", synthRunner{readBW: 0.80 * 3.35e12, linearEff: 0.9, attnEff: 0.85, tensorRate: 8e14}, h100,
			func(th *Thresholds) { th.ReadBandwidth.MinFraction = 0.75 },
			GateReadBandwidth, Pass, []string{"needs 75%"}},
		{"an absolute minimum replaces the fraction", goodH100(), h100,
			func(th *Thresholds) { th.ModelStep.MinValue = 1000 },
			GateModelStep, Fail, []string{"needs 1000.0 tokens/s"}},
		{"a card without a spec row: read against NVML's clocks", goodH100(), CardKind{NVMLBandwidthBytesPerSec: 3.35e12}, nil,
			GateReadBandwidth, Pass, []string{"NVML's memory clock and bus width imply"}},
		{"a card without a spec row: nothing to hold the tensor rate against", goodH100(), CardKind{NVMLBandwidthBytesPerSec: 3.35e12}, nil,
			GateTensor, Warn, []string{"no row for this card", "--expect GPU", "tensor.min_value"}},
		{"the emulator is no speed", synthRunner{readBW: 1e8, linearEff: 0.5, attnEff: 0.5, tensorRate: 1e9, emulated: true}, h100, nil,
			GateReadBandwidth, Skip, []string{"emulated backend", "not evaluated"}},
		{"a step the backend cannot run is skipped, not failed", synthRunner{readBW: 3.1e12, linearEff: 0.9, attnEff: 0.85, tensorRate: 8e14,
			skipSteps: map[string]bool{StepTensor: true}}, h100, nil,
			GateTensor, Skip, []string{"not measured (not supported here)", "says nothing about the card"}},
		{"a step that failed gives no value", synthRunner{readBW: 3.1e12, linearEff: 0.9, attnEff: 0.85, tensorRate: 8e14,
			failSteps: map[string]bool{StepRead: true}}, h100, nil,
			GateReadBandwidth, Fail, []string{"not measured (verification failed)"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			th := DefaultThresholds()
			if tt.th != nil {
				tt.th(&th)
			}
			plan, out := runSuite(t, s, tt.runner)
			checks, _ := PerformanceChecks(tt.kind, s, plan, out, th)
			expect(t, find(t, checks, "performance."+tt.gate), tt.verdict, tt.fragments...)
		})
	}
}

func TestCorrectnessChecks(t *testing.T) {
	r := goodH100()
	r.failSteps = map[string]bool{StepAttentionLong: true}
	plan, out := runSuite(t, standard(t), r)
	var outcomes []Outcome
	for _, st := range plan.Steps {
		outcomes = append(outcomes, out[st.Name])
	}
	outcomes = append(outcomes,
		Outcome{Step: "x.crashed", Kernel: "bf16 linear", Status: measure.StatusFailed, Reason: "CUDA error: an illegal memory access"},
		Outcome{Step: "x.skipped", Kernel: "bf16 linear", Status: measure.StatusSkipped, Reason: "needs 90 GB"},
		Outcome{Step: "x.nan", Kernel: "bf16 attention", Status: measure.StatusFailed, Reason: "256 outputs are NaN",
			Verification: Verification{Ran: true, NonFinite: true, Tolerance: 0.01}})
	checks := CorrectnessChecks(outcomes)
	if len(checks) != len(outcomes) {
		t.Fatalf("%d checks for %d outcomes", len(checks), len(outcomes))
	}
	expect(t, find(t, checks, "correctness."+StepRead), Pass, "matches the float64 reference")
	expect(t, find(t, checks, "correctness."+StepAttentionLong), Fail, "wrong results", "relative error 0.7")
	expect(t, find(t, checks, "correctness.x.crashed"), Fail, "illegal memory access", "decodebench verify")
	expect(t, find(t, checks, "correctness.x.skipped"), Skip, "not run (needs 90 GB)")
	nan := find(t, checks, "correctness.x.nan")
	expect(t, nan, Fail, "NaN or infinite output")
	if nan.Value != nil || nan.ValueText == "" {
		t.Errorf("a non-finite output: value %v, text %q", nan.Value, nan.ValueText)
	}
}
