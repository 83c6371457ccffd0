package gpuinfo

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/decodebench/decodebench/bench/gpuinfo/fakenvml"
)

func TestDecodeClockEventReasons(t *testing.T) {
	tests := []struct {
		desc      string
		mask      uint64
		names     []string
		throttled bool
	}{
		{"none", 0, nil, false},
		{"idle", nvml.ClocksEventReasonGpuIdle, []string{"Idle"}, false},
		{"application clocks", nvml.ClocksEventReasonApplicationsClocksSetting, []string{"Applications Clocks Setting"}, false},
		{"sync boost", nvml.ClocksEventReasonSyncBoost, []string{"Sync Boost"}, false},
		{"display clocks", nvml.ClocksEventReasonDisplayClockSetting, []string{"Display Clock Setting"}, false},
		{"board limit", nvml.ClocksEventReasonBoardLimit, []string{"Board Limit"}, false},
		{"power cap", nvml.ClocksEventReasonSwPowerCap, []string{"SW Power Cap"}, true},
		{"hw slowdown", nvml.ClocksThrottleReasonHwSlowdown, []string{"HW Slowdown"}, true},
		{"hw thermal", nvml.ClocksThrottleReasonHwThermalSlowdown, []string{"HW Thermal Slowdown"}, true},
		{"power brake", nvml.ClocksThrottleReasonHwPowerBrakeSlowdown, []string{"HW Power Brake Slowdown"}, true},
		{"sw thermal", nvml.ClocksEventReasonSwThermalSlowdown, []string{"SW Thermal Slowdown"}, true},
		{"idle and power cap", 0x1 | 0x4, []string{"Idle", "SW Power Cap"}, true},
		{"unknown bit", 0x1 | 1<<20, []string{"Idle", "unknown (0x100000)"}, false},
		{"all known", nvml.ClocksEventReasonAll, []string{"Idle", "Applications Clocks Setting", "SW Power Cap",
			"HW Slowdown", "Sync Boost", "SW Thermal Slowdown", "HW Thermal Slowdown", "HW Power Brake Slowdown",
			"Display Clock Setting", "Board Limit", "Reliability"}, true},
	}
	for _, tc := range tests {
		names, throttled := DecodeClockEventReasons(tc.mask)
		if !slices.Equal(names, tc.names) || throttled != tc.throttled {
			t.Errorf("%s: DecodeClockEventReasons(%#x) = %q, %v; want %q, %v", tc.desc, tc.mask, names, throttled, tc.names, tc.throttled)
		}
	}
	if ThrottleMask != 0x4|0x8|0x20|0x40|0x80 {
		t.Errorf("ThrottleMask = %#x", ThrottleMask)
	}
}

func TestReadTelemetry(t *testing.T) {
	g := set(h100(), func(s *fakenvml.State) {
		s.ClocksEventReasons = nvml.ClocksThrottleReasonHwThermalSlowdown | nvml.ClocksEventReasonSwPowerCap
	})
	want := Telemetry{
		SMClockMHz: 1980, MemClockMHz: 2619, TemperatureC: 41, PowerWatts: 412.345,
		ThrottleReasons: 0x44, Throttled: true, ThrottleText: []string{"SW Power Cap", "HW Thermal Slowdown"},
	}

	// The current entry points: the deprecated throttle call must not be made.
	d := g.Device()
	d.GetCurrentClocksThrottleReasonsFunc = nil
	got, err := ReadTelemetry(d, Features{ClocksEventReasons: true, ClocksThrottleReasons: true, Temperature: true})
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("new entry points: %+v, %v\nwant %+v", got, err, want)
	}
	if len(d.GetCurrentClocksEventReasonsCalls()) != 1 {
		t.Error("GetCurrentClocksEventReasons not used")
	}

	// A driver without ClocksEventReasons: the deprecated call.
	d = g.Device()
	d.GetCurrentClocksEventReasonsFunc = nil
	got, err = ReadTelemetry(d, Features{ClocksThrottleReasons: true, Temperature: true})
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("fallback: %+v, %v\nwant %+v", got, err, want)
	}
	if len(d.GetCurrentClocksThrottleReasonsCalls()) != 1 {
		t.Error("GetCurrentClocksThrottleReasons not used")
	}
}

func TestReadTelemetryGaps(t *testing.T) {
	g := set(h100(), func(s *fakenvml.State) { s.Returns = map[string]nvml.Return{"GetPowerUsage": nvml.ERROR_NOT_SUPPORTED} })
	d := g.Device()
	d.GetTemperatureFunc = nil
	d.GetCurrentClocksEventReasonsFunc = nil
	d.GetCurrentClocksThrottleReasonsFunc = nil
	// A driver with neither temperature nor reasons entry point.
	got, err := ReadTelemetry(d, Features{})
	if err != nil {
		t.Fatal(err)
	}
	if got.SMClockMHz != 1980 || got.PowerWatts != 0 || got.TemperatureC != 0 || got.Throttled || got.ThrottleText != nil {
		t.Errorf("telemetry %+v", got)
	}
	for _, field := range []string{"temperature", "power", "clocks event reasons"} {
		if !slices.ContainsFunc(got.Unavailable, func(s string) bool { return strings.HasPrefix(s, field+": ") }) {
			t.Errorf("unavailable %q does not name %q", got.Unavailable, field)
		}
	}

	g.Set(func(s *fakenvml.State) { s.Returns = map[string]nvml.Return{"GetClockInfo": nvml.ERROR_GPU_IS_LOST} })
	got, err = ReadTelemetry(g.Device(), Features{ClocksEventReasons: true, Temperature: true})
	if err == nil || !strings.Contains(err.Error(), "SM clock") {
		t.Errorf("lost GPU: error %v", err)
	}
	if got.TemperatureC != 41 {
		t.Errorf("the other readings lost: %+v", got)
	}
}

func TestDetectFeatures(t *testing.T) {
	lib := fakeLib(nvml.SUCCESS, []string{"nvmlDeviceGetTemperatureV", "nvmlDeviceGetCurrentClocksThrottleReasons"})
	want := Features{TemperatureV: true, ClocksThrottleReasons: true}
	if got := DetectFeatures(lib); got != want {
		t.Errorf("DetectFeatures = %+v, want %+v", got, want)
	}
}
