package gpuinfo

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// healthGPU adds what the health reads answer to a fakeGPU. returns (of the embedded fakeGPU)
// overrides these methods' answers too.
type healthGPU struct {
	fakeGPU
	eccPending                    bool
	volUncorr, aggUncorr, volCorr uint64
	retiredSBE, retiredDBE        int
	retiredPending                bool
	remapCorr, remapUncorr        int
	remapPending, remapFailed     bool
	gpuMaxPCIeGen                 int
	slowdownC, shutdownC, maxC    uint32
	defaultPowerMW                uint32
	processes                     []nvml.ProcessInfo
}

// healthyH100 is an H100 SXM with nothing wrong: Hopper remaps rows and does not retire pages.
func healthyH100() healthGPU {
	g := h100()
	g.returns = map[string]nvml.Return{"GetRetiredPages": nvml.ERROR_NOT_SUPPORTED}
	return healthGPU{
		fakeGPU: g, gpuMaxPCIeGen: 5, slowdownC: 87, shutdownC: 92, maxC: 85,
		defaultPowerMW: 700000, processes: []nvml.ProcessInfo{},
	}
}

func (g healthGPU) device() *mock.Device {
	d := g.fakeGPU.device()
	d.GetEccModeFunc = func() (nvml.EnableState, nvml.EnableState, nvml.Return) {
		return enable(g.ecc), enable(g.eccPending), g.ret("GetEccMode")
	}
	d.GetTotalEccErrorsFunc = func(kind nvml.MemoryErrorType, counter nvml.EccCounterType) (uint64, nvml.Return) {
		switch {
		case kind == nvml.MEMORY_ERROR_TYPE_UNCORRECTED && counter == nvml.VOLATILE_ECC:
			return g.volUncorr, g.ret("GetTotalEccErrors")
		case kind == nvml.MEMORY_ERROR_TYPE_UNCORRECTED && counter == nvml.AGGREGATE_ECC:
			return g.aggUncorr, g.ret("GetTotalEccErrors")
		case kind == nvml.MEMORY_ERROR_TYPE_CORRECTED && counter == nvml.VOLATILE_ECC:
			return g.volCorr, g.ret("GetTotalEccErrors")
		}
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	d.GetRetiredPagesFunc = func(cause nvml.PageRetirementCause) ([]uint64, nvml.Return) {
		n := g.retiredSBE
		if cause == nvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR {
			n = g.retiredDBE
		}
		return make([]uint64, n), g.ret("GetRetiredPages")
	}
	d.GetRetiredPagesPendingStatusFunc = func() (nvml.EnableState, nvml.Return) {
		return enable(g.retiredPending), g.ret("GetRetiredPagesPendingStatus")
	}
	d.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) {
		return g.remapCorr, g.remapUncorr, g.remapPending, g.remapFailed, g.ret("GetRemappedRows")
	}
	d.GetGpuMaxPcieLinkGenerationFunc = func() (int, nvml.Return) {
		return g.gpuMaxPCIeGen, g.ret("GetGpuMaxPcieLinkGeneration")
	}
	d.GetTemperatureThresholdFunc = func(kind nvml.TemperatureThresholds) (uint32, nvml.Return) {
		switch kind {
		case nvml.TEMPERATURE_THRESHOLD_SLOWDOWN:
			return g.slowdownC, g.ret("GetTemperatureThreshold")
		case nvml.TEMPERATURE_THRESHOLD_SHUTDOWN:
			return g.shutdownC, g.ret("GetTemperatureThreshold")
		case nvml.TEMPERATURE_THRESHOLD_GPU_MAX:
			return g.maxC, g.ret("GetTemperatureThreshold")
		}
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	d.GetPowerManagementDefaultLimitFunc = func() (uint32, nvml.Return) {
		return g.defaultPowerMW, g.ret("GetPowerManagementDefaultLimit")
	}
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return g.processes, g.ret("GetComputeRunningProcesses")
	}
	return d
}

func enable(on bool) nvml.EnableState {
	if on {
		return nvml.FEATURE_ENABLED
	}
	return nvml.FEATURE_DISABLED
}

// everyHealthSymbol is a current driver: every entry point but nvmlDeviceGetTemperatureV (which
// a mock cannot serve; see mock_test.go).
func everyHealthSymbol() map[string]bool {
	s := maps.Clone(everySymbolButTemperatureV)
	for _, name := range []string{
		"nvmlDeviceGetEccMode", "nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetRetiredPages",
		"nvmlDeviceGetRetiredPagesPendingStatus", "nvmlDeviceGetRemappedRows",
		"nvmlDeviceGetCurrPcieLinkGeneration", "nvmlDeviceGetCurrPcieLinkWidth",
		"nvmlDeviceGetMaxPcieLinkGeneration", "nvmlDeviceGetMaxPcieLinkWidth",
		"nvmlDeviceGetGpuMaxPcieLinkGeneration", "nvmlDeviceGetTemperatureThreshold",
		"nvmlDeviceGetPowerUsage", "nvmlDeviceGetEnforcedPowerLimit",
		"nvmlDeviceGetPowerManagementDefaultLimit", "nvmlDeviceGetComputeRunningProcesses_v3",
	} {
		s[name] = true
	}
	return s
}

func readHealthOf(t *testing.T, g healthGPU, symbols map[string]bool) (Health, error) {
	t.Helper()
	lib := fakeLib(nvml.SUCCESS, symbols)
	return ReadHealth(g.device(), DetectHealthFeatures(lib))
}

func TestReadHealthHealthyH100(t *testing.T) {
	h, err := readHealthOf(t, healthyH100(), everyHealthSymbol())
	if err != nil {
		t.Fatal(err)
	}
	want := Health{
		ECC:          &ECCHealth{Supported: true, Enabled: true, CountersRead: true},
		RetiredPages: &RetiredPages{Supported: false},
		RowRemapping: &RowRemapping{Supported: true},
		PCIe:         &PCIeLink{Gen: 5, Width: 16, MaxGen: 5, MaxWidth: 16, GPUMaxGen: 5},
		Temperature:  &TempThresholds{SlowdownC: 87, ShutdownC: 92, GPUMaxC: 85},
		Power:        &PowerLimits{EnforcedWatts: 700, DefaultWatts: 700},
	}
	if *h.ECC != *want.ECC || *h.RetiredPages != *want.RetiredPages || *h.RowRemapping != *want.RowRemapping ||
		*h.PCIe != *want.PCIe || *h.Temperature != *want.Temperature || *h.Power != *want.Power {
		t.Errorf("ReadHealth = %+v %+v %+v %+v %+v %+v, want %+v %+v %+v %+v %+v %+v",
			*h.ECC, *h.RetiredPages, *h.RowRemapping, *h.PCIe, *h.Temperature, *h.Power,
			*want.ECC, *want.RetiredPages, *want.RowRemapping, *want.PCIe, *want.Temperature, *want.Power)
	}
	if h.Processes == nil || len(h.Processes) != 0 {
		t.Errorf("Processes = %#v, want read and empty", h.Processes)
	}
	if h.Now.TemperatureC != 41 || h.Now.PowerWatts != 412.345 {
		t.Errorf("Now = %+v, want 41 C and 412.345 W", h.Now)
	}
	if len(h.Unavailable) != 0 {
		t.Errorf("Unavailable = %q, want none", h.Unavailable)
	}
}

func TestReadHealthFaults(t *testing.T) {
	tests := []struct {
		desc  string
		fault func(*healthGPU)
		check func(t *testing.T, h Health)
	}{
		{"uncorrectable ECC errors since boot and over the card's life",
			func(g *healthGPU) { g.volUncorr, g.aggUncorr, g.volCorr = 2, 5, 1000 },
			func(t *testing.T, h Health) {
				if e := h.ECC; e.VolatileUncorrected != 2 || e.AggregateUncorrected != 5 || e.VolatileCorrected != 1000 {
					t.Errorf("ECC = %+v", *e)
				}
			}},
		{"ECC off now, on after a reboot: the counters are not read",
			func(g *healthGPU) {
				g.ecc, g.eccPending = false, true
				g.returns["GetTotalEccErrors"] = nvml.ERROR_UNKNOWN // must not be called
			},
			func(t *testing.T, h Health) {
				if e := h.ECC; !e.Supported || e.Enabled || !e.PendingEnabled || e.CountersRead {
					t.Errorf("ECC = %+v", *e)
				}
			}},
		{"a GeForce card has no ECC",
			func(g *healthGPU) { g.returns["GetEccMode"] = nvml.ERROR_NOT_SUPPORTED },
			func(t *testing.T, h Health) {
				if h.ECC == nil || h.ECC.Supported {
					t.Errorf("ECC = %+v, want present and not supported", h.ECC)
				}
			}},
		{"pending and failed row remapping",
			func(g *healthGPU) { g.remapUncorr, g.remapPending, g.remapFailed = 3, true, true },
			func(t *testing.T, h Health) {
				if r := *h.RowRemapping; !r.Supported || r.Uncorrectable != 3 || !r.Pending || !r.Failed {
					t.Errorf("RowRemapping = %+v", r)
				}
			}},
		{"a Volta card retires pages, one pending",
			func(g *healthGPU) {
				delete(g.returns, "GetRetiredPages")
				g.returns["GetRemappedRows"] = nvml.ERROR_NOT_SUPPORTED
				g.retiredSBE, g.retiredDBE, g.retiredPending = 2, 1, true
			},
			func(t *testing.T, h Health) {
				if r := *h.RetiredPages; !r.Supported || r.MultipleSingleBit != 2 || r.DoubleBit != 1 || !r.Pending || r.Total() != 3 {
					t.Errorf("RetiredPages = %+v", r)
				}
				if h.RowRemapping == nil || h.RowRemapping.Supported {
					t.Errorf("RowRemapping = %+v, want present and not supported", h.RowRemapping)
				}
			}},
		{"a link trained at x8 gen3 in a x16 gen5 slot",
			func(g *healthGPU) { g.pcieGen, g.pcieWidth = 3, 8 },
			func(t *testing.T, h Health) {
				if *h.PCIe != (PCIeLink{Gen: 3, Width: 8, MaxGen: 5, MaxWidth: 16, GPUMaxGen: 5}) {
					t.Errorf("PCIe = %+v", *h.PCIe)
				}
			}},
		{"another process holds the card; NVML cannot see its memory",
			func(g *healthGPU) {
				g.processes = []nvml.ProcessInfo{{Pid: 4242, UsedGpuMemory: 20 << 30}, {Pid: 77, UsedGpuMemory: notAvailable}}
			},
			func(t *testing.T, h Health) {
				want := []Process{{PID: 4242, UsedMemoryBytes: 20 << 30}, {PID: 77}}
				if !slices.Equal(h.Processes, want) {
					t.Errorf("Processes = %+v, want %+v", h.Processes, want)
				}
			}},
		{"thermal throttling now",
			func(g *healthGPU) {
				g.temperatureC = 89
				g.reasons = nvml.ClocksThrottleReasonHwThermalSlowdown | nvml.ClocksEventReasonSwThermalSlowdown
			},
			func(t *testing.T, h Health) {
				if !h.Now.Throttled || h.Now.TemperatureC != 89 {
					t.Errorf("Now = %+v, want throttled at 89 C", h.Now)
				}
			}},
		{"a power limit set below the default",
			func(g *healthGPU) { g.enforcedPowerMW = 500000 },
			func(t *testing.T, h Health) {
				if *h.Power != (PowerLimits{EnforcedWatts: 500, DefaultWatts: 700}) {
					t.Errorf("Power = %+v", *h.Power)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			g := healthyH100()
			tt.fault(&g)
			h, err := readHealthOf(t, g, everyHealthSymbol())
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, h)
		})
	}
}

// An old driver without an entry point: the mock leaves nothing to call, and the read must not
// call it (go-nvml would end the process on a real driver).
func TestReadHealthMissingEntryPoints(t *testing.T) {
	symbols := everyHealthSymbol()
	delete(symbols, "nvmlDeviceGetRemappedRows")
	delete(symbols, "nvmlDeviceGetGpuMaxPcieLinkGeneration")
	delete(symbols, "nvmlDeviceGetComputeRunningProcesses_v3")
	g := healthyH100()
	d := g.device()
	d.GetRemappedRowsFunc, d.GetGpuMaxPcieLinkGenerationFunc, d.GetComputeRunningProcessesFunc = nil, nil, nil
	h, err := ReadHealth(d, DetectHealthFeatures(fakeLib(nvml.SUCCESS, symbols)))
	if err != nil {
		t.Fatal(err)
	}
	if h.RowRemapping != nil || h.Processes != nil || h.PCIe.GPUMaxGen != 0 {
		t.Errorf("RowRemapping %+v, Processes %+v, GPUMaxGen %d: want unread", h.RowRemapping, h.Processes, h.PCIe.GPUMaxGen)
	}
	joined := strings.Join(h.Unavailable, "; ")
	for _, want := range []string{"row remapping", "compute processes"} {
		if !strings.Contains(joined, want) {
			t.Errorf("Unavailable = %q, want it to name %q", h.Unavailable, want)
		}
	}
}

func TestReadHealthNoPermissionAndLostGPU(t *testing.T) {
	g := healthyH100()
	g.returns["GetComputeRunningProcesses"] = nvml.ERROR_NO_PERMISSION
	h, err := readHealthOf(t, g, everyHealthSymbol())
	if err != nil {
		t.Fatal(err)
	}
	if h.Processes != nil || !slices.ContainsFunc(h.Unavailable, func(s string) bool { return strings.HasPrefix(s, "compute processes") }) {
		t.Errorf("no permission: Processes %v, Unavailable %q", h.Processes, h.Unavailable)
	}

	g = healthyH100()
	g.returns["GetRemappedRows"] = nvml.ERROR_GPU_IS_LOST
	_, err = readHealthOf(t, g, everyHealthSymbol())
	if err == nil || !strings.Contains(err.Error(), "row remapping") {
		t.Errorf("lost GPU: err = %v, want one naming row remapping", err)
	}
	if errors.Is(err, ErrNoDriver) {
		t.Errorf("lost GPU reported as no driver: %v", err)
	}
}

func TestReadPCIeLink(t *testing.T) {
	g := healthyH100()
	g.pcieGen = 1 // idle: trained down
	link, ok, err := ReadPCIeLink(g.device(), DetectHealthFeatures(fakeLib(nvml.SUCCESS, everyHealthSymbol())))
	if err != nil || !ok || link.Gen != 1 || link.MaxGen != 5 {
		t.Errorf("ReadPCIeLink = %+v, %v, %v", link, ok, err)
	}
	_, ok, err = ReadPCIeLink(g.device(), HealthFeatures{})
	if ok || err != nil {
		t.Errorf("without the entry points: ok %v err %v, want false, nil", ok, err)
	}
}
