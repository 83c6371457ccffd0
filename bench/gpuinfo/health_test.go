package gpuinfo

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/decodebench/decodebench/bench/gpuinfo/fakenvml"
)

// healthyH100 is an H100 SXM with nothing wrong: Hopper remaps rows and does not retire pages.
func healthyH100() *fakenvml.GPU {
	return set(h100(), func(s *fakenvml.State) {
		s.RetiredPagesSupported, s.RowRemapSupported = false, true
		s.GPUMaxPCIeGen, s.SlowdownC, s.ShutdownC, s.GPUMaxC = 5, 87, 92, 85
		s.DefaultPowerLimitMW, s.Processes = 700000, []nvml.ProcessInfo{}
	})
}

func readHealthOf(t *testing.T, g *fakenvml.GPU, driver fakenvml.Driver) (Health, error) {
	t.Helper()
	lib := driver.Library(g)
	dev, _ := lib.DeviceGetHandleByIndex(0)
	return ReadHealth(dev, DetectHealthFeatures(lib))
}

func TestReadHealthHealthyH100(t *testing.T) {
	h, err := readHealthOf(t, healthyH100(), fakenvml.Driver{})
	if err != nil {
		t.Fatal(err)
	}
	want := Health{
		ECC:          &ECCHealth{Supported: true, Enabled: true, PendingEnabled: true, CountersRead: true},
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
		fault func(*fakenvml.State)
		check func(t *testing.T, h Health)
	}{
		{"uncorrectable ECC errors since boot and over the card's life",
			func(s *fakenvml.State) {
				s.VolatileUncorrected, s.AggregateUncorrected, s.VolatileCorrected = 2, 5, 1000
			},
			func(t *testing.T, h Health) {
				if e := h.ECC; e.VolatileUncorrected != 2 || e.AggregateUncorrected != 5 || e.VolatileCorrected != 1000 {
					t.Errorf("ECC = %+v", *e)
				}
			}},
		{"ECC off now, on after a reboot: the counters are not read",
			func(s *fakenvml.State) {
				s.ECC, s.ECCPending = false, true
				s.Returns = map[string]nvml.Return{"GetTotalEccErrors": nvml.ERROR_UNKNOWN} // must not be called
			},
			func(t *testing.T, h Health) {
				if e := h.ECC; !e.Supported || e.Enabled || !e.PendingEnabled || e.CountersRead {
					t.Errorf("ECC = %+v", *e)
				}
			}},
		{"a GeForce card has no ECC",
			func(s *fakenvml.State) { s.ECCSupported = false },
			func(t *testing.T, h Health) {
				if h.ECC == nil || h.ECC.Supported {
					t.Errorf("ECC = %+v, want present and not supported", h.ECC)
				}
			}},
		{"pending and failed row remapping",
			func(s *fakenvml.State) { s.RemappedUncorrectable, s.RemapPending, s.RemapFailed = 3, true, true },
			func(t *testing.T, h Health) {
				if r := *h.RowRemapping; !r.Supported || r.Uncorrectable != 3 || !r.Pending || !r.Failed {
					t.Errorf("RowRemapping = %+v", r)
				}
			}},
		{"a Volta card retires pages, one pending",
			func(s *fakenvml.State) {
				s.RetiredPagesSupported, s.RowRemapSupported = true, false
				s.RetiredSingleBit, s.RetiredDoubleBit, s.RetiredPending = 2, 1, true
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
			func(s *fakenvml.State) { s.PCIeGen, s.PCIeWidth = 3, 8 },
			func(t *testing.T, h Health) {
				if *h.PCIe != (PCIeLink{Gen: 3, Width: 8, MaxGen: 5, MaxWidth: 16, GPUMaxGen: 5}) {
					t.Errorf("PCIe = %+v", *h.PCIe)
				}
			}},
		{"another process holds the card; NVML cannot see its memory",
			func(s *fakenvml.State) {
				s.Processes = []nvml.ProcessInfo{{Pid: 4242, UsedGpuMemory: 20 << 30}, {Pid: 77, UsedGpuMemory: notAvailable}}
			},
			func(t *testing.T, h Health) {
				want := []Process{{PID: 4242, UsedMemoryBytes: 20 << 30}, {PID: 77}}
				if !slices.Equal(h.Processes, want) {
					t.Errorf("Processes = %+v, want %+v", h.Processes, want)
				}
			}},
		{"thermal throttling now",
			func(s *fakenvml.State) {
				s.TemperatureC = 89
				s.ClocksEventReasons = nvml.ClocksThrottleReasonHwThermalSlowdown | nvml.ClocksEventReasonSwThermalSlowdown
			},
			func(t *testing.T, h Health) {
				if !h.Now.Throttled || h.Now.TemperatureC != 89 {
					t.Errorf("Now = %+v, want throttled at 89 C", h.Now)
				}
			}},
		{"a power limit set below the default",
			func(s *fakenvml.State) { s.EnforcedPowerLimitMW = 500000 },
			func(t *testing.T, h Health) {
				if *h.Power != (PowerLimits{EnforcedWatts: 500, DefaultWatts: 700}) {
					t.Errorf("Power = %+v", *h.Power)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			h, err := readHealthOf(t, set(healthyH100(), tt.fault), fakenvml.Driver{})
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
	symbols := slices.DeleteFunc(slices.Clone(fakenvml.Symbols), func(s string) bool {
		return s == "nvmlDeviceGetRemappedRows" || s == "nvmlDeviceGetGpuMaxPcieLinkGeneration" || s == "nvmlDeviceGetComputeRunningProcesses_v3"
	})
	h, err := readHealthOf(t, healthyH100(), fakenvml.Driver{Symbols: symbols, Edit: func(_ int, d *mock.Device) {
		d.GetRemappedRowsFunc, d.GetGpuMaxPcieLinkGenerationFunc, d.GetComputeRunningProcessesFunc = nil, nil, nil
	}})
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
	g := set(healthyH100(), func(s *fakenvml.State) {
		s.Returns = map[string]nvml.Return{"GetComputeRunningProcesses": nvml.ERROR_NO_PERMISSION}
	})
	h, err := readHealthOf(t, g, fakenvml.Driver{})
	if err != nil {
		t.Fatal(err)
	}
	if h.Processes != nil || !slices.ContainsFunc(h.Unavailable, func(s string) bool { return strings.HasPrefix(s, "compute processes") }) {
		t.Errorf("no permission: Processes %v, Unavailable %q", h.Processes, h.Unavailable)
	}

	g = set(healthyH100(), func(s *fakenvml.State) { s.Returns = map[string]nvml.Return{"GetRemappedRows": nvml.ERROR_GPU_IS_LOST} })
	_, err = readHealthOf(t, g, fakenvml.Driver{})
	if err == nil || !strings.Contains(err.Error(), "row remapping") {
		t.Errorf("lost GPU: err = %v, want one naming row remapping", err)
	}
	if errors.Is(err, ErrNoDriver) {
		t.Errorf("lost GPU reported as no driver: %v", err)
	}
}

func TestReadPCIeLink(t *testing.T) {
	g := set(healthyH100(), func(s *fakenvml.State) { s.PCIeGen = 1 }) // idle: trained down
	link, ok, err := ReadPCIeLink(g.Device(), DetectHealthFeatures(fakeLib(nvml.SUCCESS, nil)))
	if err != nil || !ok || link.Gen != 1 || link.MaxGen != 5 {
		t.Errorf("ReadPCIeLink = %+v, %v, %v", link, ok, err)
	}
	_, ok, err = ReadPCIeLink(g.Device(), HealthFeatures{})
	if ok || err != nil {
		t.Errorf("without the entry points: ok %v err %v, want false, nil", ok, err)
	}
}
