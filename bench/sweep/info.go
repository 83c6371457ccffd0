package sweep

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/decodebench/decodebench/bench/timing"
)

// SchemaVersion is written to run.json; a reader refuses a run directory of a newer schema.
const SchemaVersion = 1

// Run states in run.json.
const (
	StateRunning     = "running"
	StateComplete    = "complete"
	StateInterrupted = "interrupted" // Ctrl-C: resumable
	StateDeviceLost  = "device_lost" // the CUDA context was lost: resumable on a healthy card
	StateFailed      = "failed"      // the sweep stopped on an error: resumable
	// StateDied: the process ended without recording how (killed, crashed, its node lost);
	// the next resume, holding the directory's lock, knows it is not running and says so.
	StateDied = "died"
)

// RunInfo is run.json: what was measured, on what, how and by which command.
type RunInfo struct {
	Schema      int      `json:"schema"`
	Version     string   `json:"decodebench_version"`
	CommandLine []string `json:"command_line"` // of the run that created the directory, exactly
	// Flags are the flags that had a value, from the command line or the environment, as
	// --name=value.
	Flags       []string  `json:"flags,omitempty"`
	Started     time.Time `json:"started"`
	Updated     time.Time `json:"updated"`
	State       string    `json:"state"`
	StateDetail string    `json:"state_detail,omitempty"`

	Backend   Backend     `json:"backend"`
	Card      Card        `json:"card"`
	Datasheet CeilingInfo `json:"datasheet_ceiling"`
	Measured  CeilingInfo `json:"measured_ceiling"`
	Axes      Axes        `json:"axes"`
	Method    Method      `json:"method"`
	Budget    *Budget     `json:"budget,omitempty"`
	// Launch is the launch baseline of the latest session: what one launch costs on this card.
	Launch *Launch `json:"launch,omitempty"`
	// Peer is the linear variant measured beside each of our linear kernels ("cublas"), or
	// empty; its measurements are in kernels.jsonl under their own keys.
	Peer string `json:"peer,omitempty"`
	// Sessions lists every run and resume of this directory, the first one first.
	Sessions []Session `json:"sessions"`
}

// Backend is the kernels library that ran.
type Backend struct {
	Name     string `json:"name"`     // "cuda" or "emu"
	Library  string `json:"library"`  // its file name (libdecodebench_cuda.so), no directory
	Emulated bool   `json:"emulated"` // the CPU emulator: times are not a speed
}

// Card is the device's identity, limits and state when the run started. NVML gives most of
// it; without NVML (the emulator, a container without the driver library) only what the
// kernels library reports is there, and NVML says why.
type Card struct {
	Index             int     `json:"index"`
	Name              string  `json:"name"`
	UUID              string  `json:"uuid,omitempty"`
	PCIBusID          string  `json:"pci_bus_id,omitempty"`
	MemoryTotalBytes  uint64  `json:"memory_total_bytes"`
	ComputeCapability string  `json:"compute_capability,omitempty"`
	SMCount           int     `json:"sm_count,omitempty"`
	L2Bytes           int64   `json:"l2_bytes,omitempty"`
	Driver            string  `json:"driver,omitempty"`
	CUDAVersion       string  `json:"cuda_version,omitempty"` // the CUDA version the driver supports
	SMClockMHz        uint32  `json:"sm_clock_mhz,omitempty"`
	MaxSMClockMHz     uint32  `json:"max_sm_clock_mhz,omitempty"`
	MemClockMHz       uint32  `json:"mem_clock_mhz,omitempty"`
	MaxMemClockMHz    uint32  `json:"max_mem_clock_mhz,omitempty"`
	ECCEnabled        bool    `json:"ecc_enabled"`
	PowerLimitWatts   float64 `json:"power_limit_watts,omitempty"`
	TemperatureC      int     `json:"temperature_c,omitempty"`
	// DeviceOrder is CUDA_DEVICE_ORDER as the run had it: PCI_BUS_ID makes CUDA's device
	// numbers NVML's.
	DeviceOrder string   `json:"cuda_device_order,omitempty"`
	NVML        string   `json:"nvml"` // "ok", or why NVML said nothing
	Unavailable []string `json:"unavailable,omitempty"`
}

// Identity names the card for messages: "NVIDIA H200 (GPU-1234...)".
func (c Card) Identity() string {
	if c.UUID != "" {
		return fmt.Sprintf("%s (%s)", c.Name, c.UUID)
	}
	return fmt.Sprintf("%s (device %d)", c.Name, c.Index)
}

// CeilingInfo is one ceiling as run.json records it.
type CeilingInfo struct {
	BandwidthBytesPerSec float64 `json:"bandwidth_bytes_per_s"`
	FLOPsPerSec          float64 `json:"flops_per_s"`
	Source               string  `json:"source"` // the spec row, or the probes that measured it
	// Probes: the keys of the probe measurements in kernels.jsonl (measured ceiling only).
	Probes []string `json:"probes,omitempty"`
}

// Known reports whether both roofs are there.
func (c CeilingInfo) Known() bool { return c.BandwidthBytesPerSec > 0 && c.FLOPsPerSec > 0 }

// Method is how the kernels were measured.
type Method struct {
	Timing                   TimingRule `json:"timing"`
	RotateFactor             float64    `json:"rotate_factor"`
	MaxRotateBytes           uint64     `json:"max_rotate_bytes"` // 0: a quarter of free memory
	Verify                   bool       `json:"verify"`
	Seed                     uint64     `json:"seed"`
	TelemetryIntervalSeconds float64    `json:"telemetry_interval_seconds"`
	ReserveFraction          float64    `json:"reserve_fraction"` // of device memory kept free when asking whether a step fits
	MemoryBytes              float64    `json:"memory_bytes"`     // the memory that fit is judged against
	ProbeBytes               uint64     `json:"probe_bytes"`
	SmallOps                 string     `json:"small_ops"`
}

// TimingRule is timing.Config with JSON names.
type TimingRule struct {
	Warmup       int     `json:"warmup"`
	MinSamples   int     `json:"min_samples"`
	MinSeconds   float64 `json:"min_seconds"`
	TargetSpread float64 `json:"target_spread"`
	MaxSeconds   float64 `json:"max_seconds"`
	MaxSamples   int     `json:"max_samples,omitempty"`
}

// RuleOf converts a timing.Config.
func RuleOf(c timing.Config) TimingRule {
	return TimingRule{Warmup: c.Warmup, MinSamples: c.MinSamples, MinSeconds: c.MinSeconds,
		TargetSpread: c.TargetSpread, MaxSeconds: c.MaxSeconds, MaxSamples: c.MaxSamples}
}

// Config converts back.
func (r TimingRule) Config() timing.Config {
	return timing.Config{Warmup: r.Warmup, MinSamples: r.MinSamples, MinSeconds: r.MinSeconds,
		TargetSpread: r.TargetSpread, MaxSeconds: r.MaxSeconds, MaxSamples: r.MaxSamples}
}

// Session is one invocation that worked on the directory.
type Session struct {
	CommandLine []string  `json:"command_line"`
	Flags       []string  `json:"flags,omitempty"`
	Version     string    `json:"decodebench_version"`
	Started     time.Time `json:"started"`
	Ended       time.Time `json:"ended,omitzero"`
	State       string    `json:"state"`
	Measured    int       `json:"measured"` // records written
}

// EndDeadSessions marks every session still "running" as died, ended when run.json was last
// updated, and returns how many. Call it holding the directory's lock: no other process can
// be running then.
func (info *RunInfo) EndDeadSessions() int {
	n := 0
	for i := range info.Sessions {
		if s := &info.Sessions[i]; s.State == StateRunning {
			s.State, s.Ended = StateDied, info.Updated
			n++
		}
	}
	if info.State == StateRunning {
		info.State, info.StateDetail = StateDied, "the process ended without recording how (killed, crashed or its node lost)"
	}
	return n
}

// CheckResume says why a run directory described by old cannot be resumed by a run described
// by cur: another backend or card, or other model axes. Batch and context axes may differ (a
// resume can extend them).
func CheckResume(dir string, old, cur RunInfo) error {
	if old.Schema > SchemaVersion {
		return fmt.Errorf("%s was written by a newer decodebench (run.json schema %d, this one reads %d)", dir, old.Schema, SchemaVersion)
	}
	if old.Backend.Name != cur.Backend.Name {
		return fmt.Errorf("%s was measured with the %s backend, this run uses %s: resume with --backend %s, or start a new run directory with --out",
			dir, old.Backend.Name, cur.Backend.Name, old.Backend.Name)
	}
	sameCard := old.Card.Name == cur.Card.Name
	if old.Card.UUID != "" || cur.Card.UUID != "" {
		sameCard = old.Card.UUID == cur.Card.UUID
	}
	if !sameCard {
		return fmt.Errorf("%s was measured on %s, this run is on %s: resume on the same card (--gpu %s), or start a new run directory with --out",
			dir, old.Card.Identity(), cur.Card.Identity(), firstNonEmpty(old.Card.UUID, fmt.Sprint(old.Card.Index)))
	}
	oldModels, curModels := modelKeys(old.Axes), modelKeys(cur.Axes)
	if !slices.Equal(oldModels, curModels) {
		return fmt.Errorf("%s measured the model axis %s, this run asks for %s: give the same --model, --dtype, --tp and dimensions to resume, or start a new run directory with --out",
			dir, strings.Join(oldModels, ", "), strings.Join(curModels, ", "))
	}
	return nil
}

func modelKeys(a Axes) []string {
	keys := make([]string, 0, len(a.Models))
	for _, m := range a.Models {
		keys = append(keys, ModelKey(m))
	}
	slices.Sort(keys)
	return keys
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
