package gpuinfo

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// HealthFeatures says which of the entry points ReadHealth and ReadPCIeLink call the loaded
// driver exports. As with Features, calling a missing one ends the process instead of returning
// an error, so each read is guarded. Most are a decade old; nvmlDeviceGetRemappedRows came with
// driver 450 (Ampere) and nvmlDeviceGetGpuMaxPcieLinkGeneration with 510.
type HealthFeatures struct {
	ECCMode              bool     `json:"ecc_mode"`               // nvmlDeviceGetEccMode
	TotalECCErrors       bool     `json:"total_ecc_errors"`       // nvmlDeviceGetTotalEccErrors
	RetiredPages         bool     `json:"retired_pages"`          // nvmlDeviceGetRetiredPages
	RetiredPagesPending  bool     `json:"retired_pages_pending"`  // nvmlDeviceGetRetiredPagesPendingStatus
	RemappedRows         bool     `json:"remapped_rows"`          // nvmlDeviceGetRemappedRows
	PCIeLink             bool     `json:"pcie_link"`              // nvmlDeviceGetCurrPcieLinkGeneration/Width and the Max pair
	GPUMaxPCIeGen        bool     `json:"gpu_max_pcie_gen"`       // nvmlDeviceGetGpuMaxPcieLinkGeneration
	TemperatureThreshold bool     `json:"temperature_threshold"`  // nvmlDeviceGetTemperatureThreshold
	PowerUsage           bool     `json:"power_usage"`            // nvmlDeviceGetPowerUsage
	EnforcedPowerLimit   bool     `json:"enforced_power_limit"`   // nvmlDeviceGetEnforcedPowerLimit
	DefaultPowerLimit    bool     `json:"default_power_limit"`    // nvmlDeviceGetPowerManagementDefaultLimit
	ComputeProcesses     bool     `json:"compute_processes"`      // nvmlDeviceGetComputeRunningProcesses (any version)
	TelemetryEntryPoints Features `json:"telemetry_entry_points"` // temperature and clocks event reasons
}

// DetectHealthFeatures looks the health entry points up in the library behind lib, after
// lib.Init. go-nvml itself picks the newest nvmlDeviceGetComputeRunningProcesses it finds, so
// any version will do.
func DetectHealthFeatures(lib nvml.Interface) HealthFeatures {
	ext := lib.Extensions()
	has := func(symbols ...string) bool {
		for _, s := range symbols {
			if ext.LookupSymbol(s) != nil {
				return false
			}
		}
		return true
	}
	return HealthFeatures{
		ECCMode:              has("nvmlDeviceGetEccMode"),
		TotalECCErrors:       has("nvmlDeviceGetTotalEccErrors"),
		RetiredPages:         has("nvmlDeviceGetRetiredPages"),
		RetiredPagesPending:  has("nvmlDeviceGetRetiredPagesPendingStatus"),
		RemappedRows:         has("nvmlDeviceGetRemappedRows"),
		PCIeLink:             has("nvmlDeviceGetCurrPcieLinkGeneration", "nvmlDeviceGetCurrPcieLinkWidth", "nvmlDeviceGetMaxPcieLinkGeneration", "nvmlDeviceGetMaxPcieLinkWidth"),
		GPUMaxPCIeGen:        has("nvmlDeviceGetGpuMaxPcieLinkGeneration"),
		TemperatureThreshold: has("nvmlDeviceGetTemperatureThreshold"),
		PowerUsage:           has("nvmlDeviceGetPowerUsage"),
		EnforcedPowerLimit:   has("nvmlDeviceGetEnforcedPowerLimit"),
		DefaultPowerLimit:    has("nvmlDeviceGetPowerManagementDefaultLimit"),
		ComputeProcesses: has("nvmlDeviceGetComputeRunningProcesses") ||
			has("nvmlDeviceGetComputeRunningProcesses_v2") || has("nvmlDeviceGetComputeRunningProcesses_v3"),
		TelemetryEntryPoints: DetectFeatures(lib),
	}
}

// Health is what NVML says about a GPU's memory errors, PCIe link, thermal and power limits and
// users at one moment. A group NVML could not read (no permission, a missing entry point) is nil
// and named in Unavailable; a group the card does not have (ECC on a GeForce card, page
// retirement on Ampere and later, which remap rows instead) is there with Supported false.
type Health struct {
	ECC          *ECCHealth      `json:"ecc,omitempty"`
	RetiredPages *RetiredPages   `json:"retired_pages,omitempty"`
	RowRemapping *RowRemapping   `json:"row_remapping,omitempty"`
	PCIe         *PCIeLink       `json:"pcie,omitempty"`
	Temperature  *TempThresholds `json:"temperature_thresholds,omitempty"`
	Power        *PowerLimits    `json:"power_limits,omitempty"`
	// Processes is every process with a CUDA context on the card; nil when it could not be read.
	Processes []Process `json:"compute_processes"`
	// Now is the card's clocks, temperature, power and clocks event reasons at the same moment.
	Now Telemetry `json:"now"`

	Unavailable []string `json:"unavailable,omitempty"`
}

// ECCHealth is the ECC mode and the error counters. Volatile counts since the driver last
// loaded; aggregate counts over the card's life.
type ECCHealth struct {
	Supported      bool `json:"supported"`
	Enabled        bool `json:"enabled"`         // now
	PendingEnabled bool `json:"pending_enabled"` // after the next reboot or reset
	// CountersRead is false when the mode was read but the counters could not be.
	CountersRead         bool   `json:"counters_read"`
	VolatileUncorrected  uint64 `json:"volatile_uncorrected"`
	AggregateUncorrected uint64 `json:"aggregate_uncorrected"`
	VolatileCorrected    uint64 `json:"volatile_corrected"`
}

// RetiredPages is dynamic page retirement (Kepler to Volta; NVIDIA's "retired pages").
type RetiredPages struct {
	Supported         bool `json:"supported"`
	MultipleSingleBit int  `json:"multiple_single_bit"` // pages retired after repeated correctable errors
	DoubleBit         int  `json:"double_bit"`          // pages retired after an uncorrectable error
	Pending           bool `json:"pending"`             // a page waits for a reboot or reset to be retired
}

// Total is the number of pages retired for any cause.
func (r RetiredPages) Total() int { return r.MultipleSingleBit + r.DoubleBit }

// RowRemapping is HBM row remapping (Ampere and later).
type RowRemapping struct {
	Supported     bool `json:"supported"`
	Correctable   int  `json:"correctable"`   // rows remapped after correctable errors
	Uncorrectable int  `json:"uncorrectable"` // rows remapped after uncorrectable errors
	Pending       bool `json:"pending"`       // a remap waits for a GPU reset
	Failed        bool `json:"failed"`        // a remap failed: the bank has no spare row left
}

// PCIeLink is the link as trained now and the most it could train to. An idle card trains its
// link down to save power, so read it under load before calling a low generation a fault.
type PCIeLink struct {
	Gen       int `json:"gen"`
	Width     int `json:"width"`
	MaxGen    int `json:"max_gen"`               // the most this card in this slot allows
	MaxWidth  int `json:"max_width"`             // ditto
	GPUMaxGen int `json:"gpu_max_gen,omitempty"` // the most the card itself allows (0: unknown)
}

// TempThresholds are the card's temperature limits, in °C; 0 where NVML does not say.
type TempThresholds struct {
	SlowdownC int `json:"slowdown_c"` // the card slows its clocks from here
	ShutdownC int `json:"shutdown_c"` // and turns off from here
	GPUMaxC   int `json:"gpu_max_c"`  // the most it should run at in normal operation
}

// PowerLimits are the enforced and the default power limit, in watts; 0 where unknown.
type PowerLimits struct {
	EnforcedWatts float64 `json:"enforced_watts"`
	DefaultWatts  float64 `json:"default_watts"`
}

// Process is a process with a CUDA context on the card.
type Process struct {
	PID             uint32 `json:"pid"`
	UsedMemoryBytes uint64 `json:"used_memory_bytes"` // 0 where NVML cannot say (some containers)
}

// ReadHealth reads every Health group of dev. A group NVML cannot read (not supported where
// that means unknown, no permission, a missing entry point) is left nil and noted in
// Unavailable; another failure (a lost GPU) is returned as an error with what was read so far.
// f must describe the library dev came from (DetectHealthFeatures).
func ReadHealth(dev nvml.Device, f HealthFeatures) (Health, error) {
	var h Health
	r := reads{}
	h.ECC = readECC(dev, f, &r)
	h.RetiredPages = readRetiredPages(dev, f, &r)
	h.RowRemapping = readRowRemapping(dev, f, &r)
	if link, ok := readPCIeLink(dev, f, &r); ok {
		h.PCIe = &link
	}
	h.Temperature = readTempThresholds(dev, f, &r)
	h.Power = readPowerLimits(dev, f, &r)
	h.Processes = readProcesses(dev, f, &r)
	now, err := ReadTelemetry(dev, f.TelemetryEntryPoints)
	h.Now = now
	h.Unavailable = append(r.missing, now.Unavailable...)
	if r.err != nil {
		return h, r.err
	}
	return h, err
}

// ReadPCIeLink reads the link's current and maximum generation and width: cheap enough to
// sample while the card works. ok is false when NVML could not give it; err is a real failure.
func ReadPCIeLink(dev nvml.Device, f HealthFeatures) (link PCIeLink, ok bool, err error) {
	r := reads{}
	link, ok = readPCIeLink(dev, f, &r)
	return link, ok, r.err
}

// ReadComputeProcesses lists the processes with a CUDA context on dev.
func ReadComputeProcesses(dev nvml.Device, f HealthFeatures) ([]Process, bool, error) {
	r := reads{}
	p := readProcesses(dev, f, &r)
	return p, p != nil, r.err
}

// supported sorts the answer of a read whose "not supported" means the card lacks the feature:
// it returns (true, true) on success, (false, true) for not supported, and (false, false) for a
// gap or failure, which r records.
func supported(r *reads, field string, ret nvml.Return) (ok, known bool) {
	switch ret {
	case nvml.SUCCESS:
		return true, true
	case nvml.ERROR_NOT_SUPPORTED:
		return false, true
	}
	r.ok(field, ret)
	return false, false
}

// entryPoint notes a missing entry point for field and reports whether it is there.
func entryPoint(r *reads, field string, present bool) bool {
	if !present {
		r.ok(field, nvml.ERROR_FUNCTION_NOT_FOUND)
	}
	return present
}

func readECC(dev nvml.Device, f HealthFeatures, r *reads) *ECCHealth {
	if !entryPoint(r, "ECC mode", f.ECCMode) {
		return nil
	}
	current, pending, ret := dev.GetEccMode()
	if ok, known := supported(r, "ECC mode", ret); !known {
		return nil
	} else if !ok {
		return &ECCHealth{}
	}
	e := &ECCHealth{Supported: true, Enabled: current == nvml.FEATURE_ENABLED, PendingEnabled: pending == nvml.FEATURE_ENABLED}
	if !e.Enabled || !entryPoint(r, "ECC error counts", f.TotalECCErrors) {
		return e // the counters only count while ECC is on
	}
	vu, ret1 := dev.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
	au, ret2 := dev.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.AGGREGATE_ECC)
	vc, ret3 := dev.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC)
	if r.ok("volatile uncorrectable ECC errors", ret1) && r.ok("aggregate uncorrectable ECC errors", ret2) &&
		r.ok("volatile correctable ECC errors", ret3) {
		e.CountersRead = true
		e.VolatileUncorrected, e.AggregateUncorrected, e.VolatileCorrected = vu, au, vc
	}
	return e
}

func readRetiredPages(dev nvml.Device, f HealthFeatures, r *reads) *RetiredPages {
	if !entryPoint(r, "retired pages", f.RetiredPages) || !entryPoint(r, "retired pages pending", f.RetiredPagesPending) {
		return nil
	}
	sbe, ret := dev.GetRetiredPages(nvml.PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)
	if ok, known := supported(r, "retired pages", ret); !known {
		return nil
	} else if !ok {
		return &RetiredPages{}
	}
	dbe, ret := dev.GetRetiredPages(nvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
	if !r.ok("retired pages (double bit)", ret) {
		return nil
	}
	pending, ret := dev.GetRetiredPagesPendingStatus()
	if !r.ok("retired pages pending", ret) {
		return nil
	}
	return &RetiredPages{Supported: true, MultipleSingleBit: len(sbe), DoubleBit: len(dbe), Pending: pending == nvml.FEATURE_ENABLED}
}

func readRowRemapping(dev nvml.Device, f HealthFeatures, r *reads) *RowRemapping {
	if !entryPoint(r, "row remapping", f.RemappedRows) {
		return nil
	}
	corr, unc, pending, failed, ret := dev.GetRemappedRows()
	if ok, known := supported(r, "row remapping", ret); !known {
		return nil
	} else if !ok {
		return &RowRemapping{}
	}
	return &RowRemapping{Supported: true, Correctable: corr, Uncorrectable: unc, Pending: pending, Failed: failed}
}

func readPCIeLink(dev nvml.Device, f HealthFeatures, r *reads) (PCIeLink, bool) {
	var l PCIeLink
	if !entryPoint(r, "PCIe link", f.PCIeLink) {
		return l, false
	}
	var ret [4]nvml.Return
	l.Gen, ret[0] = dev.GetCurrPcieLinkGeneration()
	l.Width, ret[1] = dev.GetCurrPcieLinkWidth()
	l.MaxGen, ret[2] = dev.GetMaxPcieLinkGeneration()
	l.MaxWidth, ret[3] = dev.GetMaxPcieLinkWidth()
	for i, name := range []string{"PCIe generation", "PCIe width", "max PCIe generation", "max PCIe width"} {
		if !r.ok(name, ret[i]) {
			return PCIeLink{}, false
		}
	}
	if f.GPUMaxPCIeGen {
		if g, ret := dev.GetGpuMaxPcieLinkGeneration(); ret == nvml.SUCCESS {
			l.GPUMaxGen = g
		}
	}
	return l, true
}

func readTempThresholds(dev nvml.Device, f HealthFeatures, r *reads) *TempThresholds {
	if !entryPoint(r, "temperature thresholds", f.TemperatureThreshold) {
		return nil
	}
	var t TempThresholds
	read := func(kind nvml.TemperatureThresholds) int {
		v, ret := dev.GetTemperatureThreshold(kind)
		if ret == nvml.SUCCESS {
			return int(v)
		}
		if ret != nvml.ERROR_NOT_SUPPORTED {
			r.ok("temperature threshold", ret)
		}
		return 0
	}
	t.SlowdownC = read(nvml.TEMPERATURE_THRESHOLD_SLOWDOWN)
	t.ShutdownC = read(nvml.TEMPERATURE_THRESHOLD_SHUTDOWN)
	t.GPUMaxC = read(nvml.TEMPERATURE_THRESHOLD_GPU_MAX)
	if t == (TempThresholds{}) {
		r.ok("temperature thresholds", nvml.ERROR_NOT_SUPPORTED)
		return nil
	}
	return &t
}

func readPowerLimits(dev nvml.Device, f HealthFeatures, r *reads) *PowerLimits {
	var p PowerLimits
	if entryPoint(r, "enforced power limit", f.EnforcedPowerLimit) {
		if mw, ret := dev.GetEnforcedPowerLimit(); r.ok("enforced power limit", ret) {
			p.EnforcedWatts = float64(mw) / 1000
		}
	}
	if entryPoint(r, "default power limit", f.DefaultPowerLimit) {
		if mw, ret := dev.GetPowerManagementDefaultLimit(); r.ok("default power limit", ret) {
			p.DefaultWatts = float64(mw) / 1000
		}
	}
	if p == (PowerLimits{}) {
		return nil
	}
	return &p
}

// notAvailable is NVML_VALUE_NOT_AVAILABLE, which NVML gives for the memory of a process it
// cannot see into (another container, Windows WDDM).
const notAvailable = ^uint64(0)

func readProcesses(dev nvml.Device, f HealthFeatures, r *reads) []Process {
	if !entryPoint(r, "compute processes", f.ComputeProcesses) {
		return nil
	}
	infos, ret := dev.GetComputeRunningProcesses()
	if !r.ok("compute processes", ret) {
		return nil
	}
	procs := make([]Process, 0, len(infos)) // empty, not nil: read, and nobody there
	for _, p := range infos {
		used := p.UsedGpuMemory
		if used == notAvailable {
			used = 0
		}
		procs = append(procs, Process{PID: p.Pid, UsedMemoryBytes: used})
	}
	return procs
}
