package validate

import (
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/decodebench/decodebench/bench/gpuinfo"
	"github.com/decodebench/decodebench/bench/gpuinfo/fakenvml"
)

// observe reads a simulated card as validate does: health before, three telemetry samples
// while "under load" (with load applied to the card), health after.
func observe(t *testing.T, g *fakenvml.GPU, load func(s *fakenvml.State)) HealthObservation {
	t.Helper()
	lib := fakenvml.Library(g)
	f := gpuinfo.DetectHealthFeatures(lib)
	dev := g.Device()
	o := HealthObservation{UnderLoad: true}
	if v, ret := dev.GetMaxClockInfo(nvml.CLOCK_MEM); ret == nvml.SUCCESS {
		o.MaxMemClockMHz = v
	}
	var err error
	if o.Before, err = gpuinfo.ReadHealth(dev, f); err != nil {
		t.Fatal(err)
	}
	g.Set(func(s *fakenvml.State) {
		// Under load an idle-trained link comes up, clocks rise and the idle reason goes.
		s.ClocksEventReasons, s.PowerMW, s.TemperatureC = 0, 650000, 62
		if load != nil {
			load(s)
		}
	})
	for range 3 {
		tel, err := gpuinfo.ReadTelemetry(dev, f.TelemetryEntryPoints)
		if err != nil {
			t.Fatal(err)
		}
		link, ok, err := gpuinfo.ReadPCIeLink(dev, f)
		if err != nil || !ok {
			t.Fatalf("PCIe link: ok %v, %v", ok, err)
		}
		o.During = append(o.During, Sample{Telemetry: tel, PCIe: &link})
	}
	if o.After, err = gpuinfo.ReadHealth(dev, f); err != nil {
		t.Fatal(err)
	}
	if procs, ok, err := gpuinfo.ReadComputeProcesses(dev, f); ok && err == nil && len(procs) > 0 {
		o.Busy, o.WasBusy, o.WaitedSeconds = procs, true, 30
	}
	return o
}

func TestHealthyCardPassesEveryHealthCheck(t *testing.T) {
	g := fakenvml.H100(0)
	g.Set(func(s *fakenvml.State) { s.PCIeGen = 1 }) // idle: trained down before the run
	checks := HealthChecks(observe(t, g, func(s *fakenvml.State) { s.PCIeGen = 5 }), DefaultThresholds().Health)
	if len(checks) != 11 {
		t.Errorf("%d health checks, want 11", len(checks))
	}
	for _, c := range checks {
		if c.Verdict != Pass {
			t.Errorf("%s: %s: %s", c.ID, c.Verdict, c.Message)
		}
		if c.Message == "" || c.Category != CategoryHealth {
			t.Errorf("%s: message %q category %q", c.ID, c.Message, c.Category)
		}
	}
	expect(t, find(t, checks, "health.pcie_link"), Pass, "gen5 x16")
}

func TestHealthFaults(t *testing.T) {
	tests := []struct {
		desc      string
		setup     func(s *fakenvml.State) // before the run
		load      func(s *fakenvml.State) // while it runs
		id        string
		verdict   Verdict
		fragments []string
	}{
		{"uncorrectable ECC errors since the driver loaded",
			func(s *fakenvml.State) { s.VolatileUncorrected, s.AggregateUncorrected = 3, 3 }, nil,
			"health.ecc_errors", Fail, []string{"3 uncorrectable ECC error(s)", "reset the GPU", "RMA"}},
		{"an uncorrectable error during the run",
			nil, func(s *fakenvml.State) { s.VolatileUncorrected, s.AggregateUncorrected = 1, 1 },
			"health.ecc_errors", Fail, []string{"1 uncorrectable ECC error(s)"}},
		{"uncorrectable ECC errors in the card's past only",
			func(s *fakenvml.State) { s.AggregateUncorrected = 2 }, nil,
			"health.ecc_errors", Warn, []string{"2 over the card's life"}},
		{"corrected ECC errors past the threshold, most during the run",
			func(s *fakenvml.State) { s.VolatileCorrected = 40 }, func(s *fakenvml.State) { s.VolatileCorrected = 150 },
			"health.ecc_corrected", Warn, []string{"150 corrected ECC errors", "110 of them during this run", "100 or more is flagged"}},
		{"a few corrected ECC errors are counted, not flagged",
			func(s *fakenvml.State) { s.VolatileCorrected = 7 }, nil,
			"health.ecc_corrected", Pass, []string{"7 corrected ECC errors since the driver loaded, under the 100"}},
		{"the memory clock held below its maximum under load",
			func(s *fakenvml.State) { s.MemClockMHz = 1593 }, func(s *fakenvml.State) { s.MemClockMHz = 1593 },
			"health.mem_clock", Warn, []string{"peaked at 1593 MHz under load", "maximum 2619 MHz", "nvidia-smi -rmc"}},
		{"an idle memory clock rises to its maximum under load",
			func(s *fakenvml.State) { s.MemClockMHz = 405 }, func(s *fakenvml.State) { s.MemClockMHz = 2619 },
			"health.mem_clock", Pass, []string{"reached its maximum, 2619 MHz"}},
		{"ECC off",
			func(s *fakenvml.State) { s.ECC, s.ECCPending = false, false }, nil,
			"health.ecc_mode", Fail, []string{"ECC is off", "nvidia-smi -e 1"}},
		{"ECC off until the next reboot",
			func(s *fakenvml.State) { s.ECC = false }, nil,
			"health.ecc_mode", Fail, []string{"turns on at the next reboot"}},
		{"a pending row remap",
			func(s *fakenvml.State) { s.RemapPending, s.RemappedUncorrectable = true, 1 }, nil,
			"health.row_remapping", Fail, []string{"row remap is pending", "reset the GPU"}},
		{"a failed row remap",
			func(s *fakenvml.State) { s.RemapFailed = true }, nil,
			"health.row_remapping", Fail, []string{"remap failed", "RMA"}},
		{"a page pending retirement on a Volta card",
			func(s *fakenvml.State) {
				s.RowRemapSupported, s.RetiredPagesSupported = false, true
				s.RetiredDoubleBit, s.RetiredPending = 1, true
			}, nil,
			"health.retired_pages", Fail, []string{"waits to be retired"}},
		{"a few retired pages",
			func(s *fakenvml.State) {
				s.RowRemapSupported, s.RetiredPagesSupported, s.RetiredSingleBit = false, true, 4
			}, nil,
			"health.retired_pages", Warn, []string{"4 retired pages"}},
		{"PCIe at x8 gen3 on a x16 gen5 card",
			func(s *fakenvml.State) { s.PCIeGen, s.PCIeWidth = 3, 8 }, func(s *fakenvml.State) { s.PCIeGen, s.PCIeWidth = 3, 8 },
			"health.pcie_link", Fail, []string{"x8", "allow x16", "reseat"}},
		{"PCIe stuck at gen3 under load",
			func(s *fakenvml.State) { s.PCIeGen = 1 }, func(s *fakenvml.State) { s.PCIeGen = 3 },
			"health.pcie_link", Fail, []string{"stayed at gen3 under load", "allow gen5"}},
		{"a gen5 card in a gen4 slot",
			func(s *fakenvml.State) { s.PCIeGen, s.MaxPCIeGen = 4, 4 }, func(s *fakenvml.State) { s.PCIeGen = 4 },
			"health.pcie_link", Warn, []string{"holds the link to gen4", "card does gen5"}},
		{"thermal throttling",
			nil, func(s *fakenvml.State) {
				s.TemperatureC = 88
				s.ClocksEventReasons = nvml.ClocksThrottleReasonHwThermalSlowdown | nvml.ClocksEventReasonSwThermalSlowdown
			},
			"health.throttling", Fail, []string{"HW Thermal Slowdown in 3", "SW Thermal Slowdown in 3", "cooling"}},
		{"hot, at the slowdown temperature",
			nil, func(s *fakenvml.State) { s.TemperatureC = 87 },
			"health.temperature", Fail, []string{"87 °C", "slowdown temperature"}},
		{"warm, near the slowdown temperature",
			nil, func(s *fakenvml.State) { s.TemperatureC = 84 },
			"health.temperature", Warn, []string{"within 3 °C"}},
		{"a power brake",
			nil, func(s *fakenvml.State) { s.ClocksEventReasons = nvml.ClocksThrottleReasonHwPowerBrakeSlowdown },
			"health.throttling", Fail, []string{"HW Power Brake Slowdown"}},
		{"the software power cap is normal under load",
			nil, func(s *fakenvml.State) { s.ClocksEventReasons = nvml.ClocksEventReasonSwPowerCap },
			"health.throttling", Pass, []string{"held at its power limit in 3"}},
		{"a power limit lowered with nvidia-smi -pl",
			func(s *fakenvml.State) { s.EnforcedPowerLimitMW = 500000 }, func(s *fakenvml.State) { s.PowerMW = 490000 },
			"health.power", Warn, []string{"500 W", "default 700 W", "nvidia-smi -pl 700"}},
		{"another process on the card",
			func(s *fakenvml.State) {
				s.Processes = []nvml.ProcessInfo{{Pid: 4242, UsedGpuMemory: 20 << 30}}
			}, nil,
			"health.idle", Fail, []string{"pid 4242 using 20.0 GiB", "stop it"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			g := fakenvml.H100(0)
			if tt.setup != nil {
				g.Set(tt.setup)
			}
			checks := HealthChecks(observe(t, g, tt.load), DefaultThresholds().Health)
			expect(t, find(t, checks, tt.id), tt.verdict, tt.fragments...)
			if got := verdictOf(checks); got != Worst(tt.verdict, got) || (tt.verdict == Fail && got != Fail) {
				t.Errorf("card verdict %s with a %s check", got, tt.verdict)
			}
		})
	}
}

// A reading NVML will not give must not pass silently: WARN, or SKIP for the corrected errors
// and the memory clock, whose unread inputs the ECC and throttling checks already warn of.
func TestUnreadableHealthWarns(t *testing.T) {
	var o HealthObservation
	o.Before.Unavailable = []string{"row remapping: Insufficient Permissions"}
	o.After = o.Before
	checks := HealthChecks(o, DefaultThresholds().Health)
	for _, c := range checks {
		if c.Verdict != Warn && !(c.Verdict == Skip && (c.ID == "health.ecc_corrected" || c.ID == "health.mem_clock")) {
			t.Errorf("%s: %s with nothing read (%s)", c.ID, c.Verdict, c.Message)
		}
	}
	expect(t, find(t, checks, "health.row_remapping"), Warn, "Insufficient Permissions", "nvidia-smi -q -d ROW_REMAPPER")
}

// A card whose suite did not run (busy) was never under load: a trained-down link is a WARN.
func TestPCIeIdleOnlyWarns(t *testing.T) {
	g := fakenvml.H100(0)
	g.Set(func(s *fakenvml.State) { s.PCIeGen = 1 })
	o := observe(t, g, func(s *fakenvml.State) { s.PCIeGen = 1 })
	o.UnderLoad = false
	expect(t, find(t, HealthChecks(o, DefaultThresholds().Health), "health.pcie_link"), Warn, "only read while the card idled")
}

// A low memory clock read only while the card idled (its suite skipped, or run on the
// emulator) says nothing: SKIP, never WARN or PASS.
func TestMemClockIdleOnlySkips(t *testing.T) {
	g := fakenvml.H100(0)
	g.Set(func(s *fakenvml.State) { s.MemClockMHz = 405 })
	o := observe(t, g, func(s *fakenvml.State) { s.MemClockMHz = 405 })
	o.UnderLoad = false
	expect(t, find(t, HealthChecks(o, DefaultThresholds().Health), "health.mem_clock"), Skip, "405 MHz of its 2619 MHz", "only while the card idled")
}

// Rows remapped after uncorrectable errors warn, as pages retired after them do.
func TestRemappedRowsAfterUncorrectableWarn(t *testing.T) {
	c := rowRemapCheck(gpuinfo.Health{RowRemapping: &gpuinfo.RowRemapping{Supported: true, Uncorrectable: 3, Correctable: 1}})
	if c.Verdict != Warn || !strings.Contains(c.Message, "3 rows remapped after uncorrectable errors") {
		t.Errorf("%s: %s", c.Verdict, c.Message)
	}
	if c := rowRemapCheck(gpuinfo.Health{RowRemapping: &gpuinfo.RowRemapping{Supported: true, Correctable: 4}}); c.Verdict != Pass {
		t.Errorf("correctable only: %s", c.Verdict)
	}
}
