package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/step"
	"github.com/decodebench/decodebench/bench/step/steptest"
	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

// plantWrongRMSNorm runs every whole step of the command on a device whose RMSNorm uses the
// wrong epsilon (steptest.WrongRMSNorm): finite, plausible and wrong.
func plantWrongRMSNorm(t *testing.T) {
	t.Helper()
	sweepMeasurerHook = func(m sweep.Measurer) sweep.Measurer {
		d, ok := m.(sweep.DeviceMeasurer)
		if !ok {
			t.Fatalf("the measurer is a %T, not a sweep.DeviceMeasurer", m)
		}
		d.StepDevice = func(dev *cgo.Device) step.TimedDevice { return steptest.WrongRMSNorm(dev) }
		return d
	}
	t.Cleanup(func() { sweepMeasurerHook = nil })
}

// TestStepVerifiedEmulated: every record of a whole-step run on the emulator is verified,
// and the line, the table and the JSON record say how.
func TestStepVerifiedEmulated(t *testing.T) {
	tiny := tinyStepConfig(t)
	emuEnv(t)
	stdout, stderr, code, msg := runApp(t, "step", "--backend", "emu", "--model-config", tiny, "--batch", "3", "--context", "24", "--steps", "3")
	if code != 0 {
		t.Fatalf("exit %d %s\n%s\n%s", code, msg, stdout, stderr)
	}
	for _, want := range []string{"[verified: 1/", "2/3 sequences, S=24, 2 steps]", "| verified |", "| yes: 1/"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	stdout, _, code, msg = runApp(t, "step", "--backend", "emu", "--model-config", tiny, "--batch", "2", "--context", "17", "--steps", "2", "--json")
	if code != 0 {
		t.Fatalf("--json: exit %d %s", code, msg)
	}
	var r step.Record
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout)), &r); err != nil {
		t.Fatal(err)
	}
	if v := r.Verification; !v.Verified || v.Steps != 2 || v.Sequences != 2 || v.Logits == 0 || v.Bound <= 0 || len(v.Modes) == 0 {
		t.Errorf("verification %+v", v)
	}
}

// TestStepRefusesAWrongStep: a wrong small op fails the step's verification: the record is
// failed with the first bad logit, neither mode is timed, and the command exits 1.
func TestStepRefusesAWrongStep(t *testing.T) {
	tiny := tinyStepConfig(t)
	emuEnv(t)
	plantWrongRMSNorm(t)
	stdout, stderr, code, msg := runApp(t, "step", "--backend", "emu", "--model-config", tiny, "--batch", "2", "--context", "17", "--steps", "2", "--json")
	if code != exitFailure || !strings.Contains(msg, "1 whole step(s)") {
		t.Fatalf("exit %d %q; want exit 1 naming the failed step\n%s\n%s", code, msg, stdout, stderr)
	}
	var r step.Record
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout)), &r); err != nil {
		t.Fatalf("%v:\n%s", err, stdout)
	}
	v := r.Verification
	if r.Status != measure.StatusFailed || v.Verified || v.FirstBad == nil || v.FirstBad.Got == v.FirstBad.Want ||
		!strings.Contains(r.Reason, "disagrees with the float64 forward pass") || !strings.Contains(r.Reason, "logit") {
		t.Errorf("record %s %q, verification %+v; want failed with the first bad logit", r.Status, r.Reason, v)
	}
	if r.Graph.OK() || r.Eager.OK() || r.Graph.Timed != nil || r.Eager.Timed != nil {
		t.Errorf("a wrong step was timed: graph %+v, eager %+v", r.Graph, r.Eager)
	}
	stdout, _, code, _ = runApp(t, "step", "--backend", "emu", "--model-config", tiny, "--batch", "2", "--context", "17", "--steps", "2")
	if code != exitFailure || !strings.Contains(stdout, "FAILED: ") || !strings.Contains(stdout, "| NO |") {
		t.Errorf("exit %d; the table does not say the step failed its verification:\n%s", code, stdout)
	}
}

// TestStepNothingFits: a step of which no configuration fits is refused before any device
// work, as sweep refuses it: exit 2 (the request cannot run here), saying why and what would,
// never exit 0.
func TestStepNothingFits(t *testing.T) {
	emuEnv(t)
	_, _, code, msg := runApp(t, "step", "--backend", "emu", "--model", "Llama-3-70B", "--batch", "1", "--context", "64", "--steps", "2")
	if code != exitUsage || !strings.Contains(msg, "does not fit") || !strings.Contains(msg, "--model tiny-emu") {
		t.Fatalf("exit %d %q; want exit 2 saying nothing fits and what would", code, msg)
	}
}

// TestSweepE2ERefusesAWrongStep: `sweep --step e2e` records a wrong step failed in
// steps.jsonl, untimed, and exits 1.
func TestSweepE2ERefusesAWrongStep(t *testing.T) {
	sweepHermetic(t, cgotest.EmuPath(t))
	plantWrongRMSNorm(t)
	stdout, code, msg := runSweepCLI(t, tinySweep("run", "--step", "e2e", "--e2e-steps", "2", "--batch", "2", "--context", "64")...)
	if code != exitFailure || !strings.Contains(msg, "end-to-end step(s) failed") {
		t.Fatalf("exit %d %q; want exit 1 naming the failed steps\n%s", code, msg, stdout)
	}
	p, err := sweep.Load("run")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Steps) != 1 {
		t.Fatalf("%d step records, want 1", len(p.Steps))
	}
	r := p.Steps[0]
	if r.Status != measure.StatusFailed || r.Verification.FirstBad == nil || r.Graph.OK() || r.Eager.OK() {
		t.Errorf("step record %s %q, verification %+v", r.Status, r.Reason, r.Verification)
	}
	if data, _ := os.ReadFile(filepath.Join("run", sweep.StepsFile)); !strings.Contains(string(data), `"first_bad":{`) {
		t.Errorf("%s does not give the first bad logit:\n%s", sweep.StepsFile, data)
	}
}

// noRoom is a device that reports no free memory: no whole step fits.
type noRoom struct{ step.TimedDevice }

func (d noRoom) Props() (cgo.DeviceProps, error) {
	p, err := d.TimedDevice.Props()
	p.MemFreeBytes = 0
	return p, err
}

// TestSweepE2ENothingFits: a `sweep --step e2e` of which no whole step fits records them
// skipped and exits 1, where it exited 0.
func TestSweepE2ENothingFits(t *testing.T) {
	sweepHermetic(t, cgotest.EmuPath(t))
	sweepMeasurerHook = func(m sweep.Measurer) sweep.Measurer {
		d := m.(sweep.DeviceMeasurer)
		d.StepDevice = func(dev *cgo.Device) step.TimedDevice { return noRoom{dev} }
		return d
	}
	t.Cleanup(func() { sweepMeasurerHook = nil })
	stdout, code, msg := runSweepCLI(t, tinySweep("run", "--step", "e2e", "--e2e-steps", "2", "--batch", "1", "--context", "64")...)
	if code != exitFailure || !strings.Contains(msg, "none of the 1 end-to-end step(s) could be built, fit and be verified") {
		t.Fatalf("exit %d %q; want exit 1 saying no whole step ran\n%s", code, msg, stdout)
	}
	p, err := sweep.Load("run")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Steps) != 1 || p.Steps[0].Status != measure.StatusSkipped || !strings.Contains(p.Steps[0].Reason, "does not fit") {
		t.Fatalf("step records %+v; want one skipped as not fitting", p.Steps)
	}
}
