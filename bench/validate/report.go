package validate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/decodebench/decodebench/bench/atomicfile"
	"github.com/decodebench/decodebench/bench/fileio"
	"github.com/decodebench/decodebench/bench/format"
	"github.com/decodebench/decodebench/bench/gpuinfo"
)

// ReportSchema names the JSON report format (docs/validate-schema.md). A change that removes or
// retypes a field takes a new version; adding fields does not.
const ReportSchema = "decodebench.validate/v1"

// Report is one box's validation: what `decodebench validate --json` writes.
type Report struct {
	Schema   string `json:"schema"`
	Version  string `json:"decodebench_version"`
	Hostname string `json:"hostname"`
	// CommandLine is the argv validate ran with.
	CommandLine []string  `json:"command_line"`
	StartedAt   time.Time `json:"started_at"`
	FinishedAt  time.Time `json:"finished_at"`
	Seconds     float64   `json:"seconds"`

	Backend  string `json:"backend"` // "cuda" or "emu" ("" when nothing ran)
	Library  string `json:"library,omitempty"`
	Emulated bool   `json:"emulated"`
	Suite    string `json:"suite"`
	// Thresholds says where the thresholds came from ("built-in" or a file's path).
	Thresholds string `json:"thresholds"`
	// ExpectedGPU is --expect: the spec row every card must be.
	ExpectedGPU string `json:"expected_gpu,omitempty"`

	Driver            string `json:"driver,omitempty"`
	CUDADriverVersion string `json:"cuda_driver_version,omitempty"`

	Cards []Card `json:"cards"`
	// Checks are about the box rather than one card: NVML, the GPU count, card kinds.
	Checks []Check `json:"checks"`

	Verdict Verdict `json:"verdict"`
	Counts  Counts  `json:"counts"` // checks by verdict, over the box and every card
	// Error says why the box could not be validated at all (no driver, no GPU); the verdict is
	// then FAIL.
	Error string `json:"error,omitempty"`
	// Interrupted says what stopped validate before its verdict ("SIGTERM during the suite");
	// the verdict is then INTERRUPTED, whatever the checks say.
	Interrupted string `json:"interrupted,omitempty"`
}

// Card is one GPU's identity, checks and measurements.
type Card struct {
	Index    int    `json:"index"` // NVML index
	UUID     string `json:"uuid"`
	Serial   string `json:"serial,omitempty"`
	PCIBusID string `json:"pci_bus_id"`
	Name     string `json:"name"` // NVML product name
	// SpecKey is the bench/roofline row the card matched ("" for none).
	SpecKey     string `json:"spec_key"`
	MemoryBytes uint64 `json:"memory_bytes"`
	// BackendDevice is the index the kernels library ran it as (-1: not run, NVML lost it).
	BackendDevice int `json:"backend_device"`
	// CutShort says the card's suite was stopped by an interrupt: its verdict is INTERRUPTED.
	CutShort bool `json:"cut_short,omitempty"`

	Verdict Verdict     `json:"verdict"`
	Checks  []Check     `json:"checks"`
	Gates   []GateValue `json:"gates"`

	Outcomes []Outcome       `json:"outcomes,omitempty"`
	Health   *gpuinfo.Health `json:"health,omitempty"` // as read after the suite
	// Readings summarizes the telemetry sampled during the run.
	Readings ReadingSummary `json:"readings"`
}

// ReadingSummary condenses the telemetry samples of a run.
type ReadingSummary struct {
	Samples         int     `json:"samples"`
	MaxTemperatureC int     `json:"max_temperature_c"`
	MaxPowerWatts   float64 `json:"max_power_watts"`
	MinSMClockMHz   uint32  `json:"min_sm_clock_mhz"`
	MaxSMClockMHz   uint32  `json:"max_sm_clock_mhz"`
	MinMemClockMHz  uint32  `json:"min_mem_clock_mhz"`
	// ThrottleReasons is the union of the clocks event reasons seen, as named by nvidia-smi.
	ThrottleReasons []string `json:"throttle_reasons,omitempty"`
}

// Gate returns the card's value of the named gate.
func (c Card) Gate(name string) (GateValue, bool) {
	for _, g := range c.Gates {
		if g.Gate == name {
			return g, true
		}
	}
	return GateValue{}, false
}

// Finish sets the verdicts and counts from the checks: each card's verdict is its worst check,
// the box's is the worst of its cards and its own checks. A box with no card fails. A card cut
// short is INTERRUPTED, and so is the whole box when Interrupted is set.
func (r *Report) Finish() {
	if r.Cards == nil {
		r.Cards = []Card{}
	}
	if r.Checks == nil {
		r.Checks = []Check{}
	}
	var counts Counts
	verdict := verdictOf(r.Checks)
	for _, c := range r.Checks {
		counts.add(c.Verdict)
	}
	for i := range r.Cards {
		card := &r.Cards[i]
		card.Verdict = verdictOf(card.Checks)
		for _, c := range card.Checks {
			counts.add(c.Verdict)
		}
		verdict = Worst(verdict, card.Verdict)
		if card.CutShort {
			card.Verdict = Interrupted
		}
	}
	if len(r.Cards) == 0 || r.Error != "" {
		verdict = Fail
	}
	if r.Interrupted != "" {
		verdict = Interrupted
	}
	r.Verdict, r.Counts = verdict, counts
}

// ExitInterrupted is the exit status of an interrupted validate: 128 + SIGINT, as a shell
// reports a job stopped by Ctrl-C.
const ExitInterrupted = 130

// ExitCode is the process exit status the verdict gives: 0 for PASS and WARN, 1 for FAIL and
// 130 for INTERRUPTED.
func (r Report) ExitCode() int {
	switch r.Verdict {
	case Pass, Warn:
		return 0
	case Interrupted:
		return ExitInterrupted
	}
	return 1
}

// EncodeReport is r as the indented JSON WriteReport writes.
func EncodeReport(r Report) ([]byte, error) {
	var data bytes.Buffer
	if err := format.WriteJSON(&data, r); err != nil {
		return nil, err
	}
	return data.Bytes(), nil
}

// WriteReport writes r as indented JSON to path, atomically (atomicfile.Write).
func WriteReport(path string, r Report) error {
	data, err := EncodeReport(r)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, data)
}

// ReadReport reads a report and checks its schema.
func ReadReport(path string) (Report, error) {
	data, err := fileio.Read(path, fileio.DocumentBytes)
	if err != nil {
		return Report{}, err
	}
	var r Report
	if err := json.Unmarshal(data, &r); err != nil {
		return Report{}, fmt.Errorf("%s: %w", path, err)
	}
	if r.Schema != ReportSchema {
		return Report{}, fmt.Errorf("%s: schema %q is not a validate report (%q)", path, r.Schema, ReportSchema)
	}
	return r, nil
}
