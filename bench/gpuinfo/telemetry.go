package gpuinfo

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Features says which NVML entry points the loaded driver exports, where a driver may lack one.
//
// go-nvml calls the C functions directly and links with unresolved symbols allowed, so calling
// an entry point the loaded libnvidia-ml.so.1 lacks does not return an error: the dynamic loader
// ends the process ("symbol lookup error: undefined symbol: nvmlDeviceGetTemperatureV", seen
// with Debian's 535.309.01 library). Check before calling. nvmlDeviceGetCurrentClocksEventReasons
// appeared in driver 535 and nvmlDeviceGetTemperatureV after it; CUDA 13.0 deprecates the older
// ClocksThrottleReasons and GetTemperature, which a later driver may drop.
type Features struct {
	ClocksEventReasons    bool `json:"clocks_event_reasons"`    // nvmlDeviceGetCurrentClocksEventReasons
	ClocksThrottleReasons bool `json:"clocks_throttle_reasons"` // nvmlDeviceGetCurrentClocksThrottleReasons (deprecated)
	TemperatureV          bool `json:"temperature_v"`           // nvmlDeviceGetTemperatureV
	Temperature           bool `json:"temperature"`             // nvmlDeviceGetTemperature (deprecated)
	MemoryBusWidth        bool `json:"memory_bus_width"`        // nvmlDeviceGetMemoryBusWidth
}

// DetectFeatures looks the entry points up in the library behind lib. Call it after lib.Init:
// before, go-nvml finds no symbol and every field is false.
func DetectFeatures(lib nvml.Interface) Features {
	ext := lib.Extensions()
	has := func(symbol string) bool { return ext.LookupSymbol(symbol) == nil }
	return Features{
		ClocksEventReasons:    has("nvmlDeviceGetCurrentClocksEventReasons"),
		ClocksThrottleReasons: has("nvmlDeviceGetCurrentClocksThrottleReasons"),
		TemperatureV:          has("nvmlDeviceGetTemperatureV"),
		Temperature:           has("nvmlDeviceGetTemperature"),
		MemoryBusWidth:        has("nvmlDeviceGetMemoryBusWidth"),
	}
}

// Telemetry is one reading of the state that bears on a timing: clocks, temperature, power and
// why the clocks are below their maximum.
type Telemetry struct {
	SMClockMHz      uint32   `json:"sm_clock_mhz"`
	MemClockMHz     uint32   `json:"mem_clock_mhz"`
	TemperatureC    int      `json:"temperature_c"`
	PowerWatts      float64  `json:"power_watts"`
	ThrottleReasons uint64   `json:"throttle_reasons"` // NVML clocks event reasons bit mask
	Throttled       bool     `json:"throttled"`        // a reason in ThrottleMask is set
	ThrottleText    []string `json:"throttle_text,omitempty"`
	// Unavailable lists what NVML could not give, with its reason.
	Unavailable []string `json:"unavailable,omitempty"`
}

// ThrottleMask holds the clocks event reasons that mean the card slowed itself down: hardware
// slowdown, hardware thermal slowdown, hardware power brake, software thermal slowdown and the
// software power cap. Idle, application clocks, sync boost and display clocks do not count,
// and neither (for now) do the board-limit and reliability policies of recent drivers.
const ThrottleMask uint64 = nvml.ClocksThrottleReasonHwSlowdown |
	nvml.ClocksThrottleReasonHwThermalSlowdown |
	nvml.ClocksThrottleReasonHwPowerBrakeSlowdown |
	nvml.ClocksEventReasonSwThermalSlowdown |
	nvml.ClocksEventReasonSwPowerCap

// clockEventReasons names each bit as nvidia-smi -q does.
var clockEventReasons = []struct {
	bit  uint64
	name string
}{
	{nvml.ClocksEventReasonGpuIdle, "Idle"},
	{nvml.ClocksEventReasonApplicationsClocksSetting, "Applications Clocks Setting"},
	{nvml.ClocksEventReasonSwPowerCap, "SW Power Cap"},
	{nvml.ClocksThrottleReasonHwSlowdown, "HW Slowdown"},
	{nvml.ClocksEventReasonSyncBoost, "Sync Boost"},
	{nvml.ClocksEventReasonSwThermalSlowdown, "SW Thermal Slowdown"},
	{nvml.ClocksThrottleReasonHwThermalSlowdown, "HW Thermal Slowdown"},
	{nvml.ClocksThrottleReasonHwPowerBrakeSlowdown, "HW Power Brake Slowdown"},
	{nvml.ClocksEventReasonDisplayClockSetting, "Display Clock Setting"},
	{nvml.ClocksEventReasonBoardLimit, "Board Limit"},
	{nvml.ClocksEventReasonReliability, "Reliability"},
}

// DecodeClockEventReasons names the bits set in an NVML clocks event (throttle) reasons mask,
// in bit order, with any bit NVML has not defined as "unknown (0x...)", and reports whether a
// bit of ThrottleMask is set.
func DecodeClockEventReasons(mask uint64) (names []string, throttled bool) {
	known := uint64(0)
	for _, r := range clockEventReasons {
		known |= r.bit
		if mask&r.bit != 0 {
			names = append(names, r.name)
		}
	}
	if rest := mask &^ known; rest != 0 {
		names = append(names, fmt.Sprintf("unknown (%#x)", rest))
	}
	return names, mask&ThrottleMask != 0
}

// ReadTelemetry reads dev's clocks, temperature, power and clocks event reasons, preferring
// the entry points CUDA 13 keeps (GetCurrentClocksEventReasons, GetTemperatureV) where f says
// the driver has them and falling back to the deprecated ones. A reading NVML cannot give stays
// zero and is named in Unavailable; any other failure (a lost GPU) is returned as an error with
// what was read so far.
//
// f must describe the library dev came from (System.Features, or DetectFeatures): see Features
// for why a wrong guess ends the process rather than returning an error.
func ReadTelemetry(dev nvml.Device, f Features) (Telemetry, error) {
	var t Telemetry
	r := reads{}
	if v, ret := dev.GetClockInfo(nvml.CLOCK_SM); r.ok("SM clock", ret) {
		t.SMClockMHz = v
	}
	if v, ret := dev.GetClockInfo(nvml.CLOCK_MEM); r.ok("memory clock", ret) {
		t.MemClockMHz = v
	}
	if v, ret := readTemperature(dev, f); r.ok("temperature", ret) {
		t.TemperatureC = v
	}
	if mw, ret := dev.GetPowerUsage(); r.ok("power", ret) {
		t.PowerWatts = float64(mw) / 1000
	}
	if mask, ret := readClockEventReasons(dev, f); r.ok("clocks event reasons", ret) {
		t.ThrottleReasons = mask
		t.ThrottleText, t.Throttled = DecodeClockEventReasons(mask)
	}
	t.Unavailable = r.missing
	return t, r.err
}

func readTemperature(dev nvml.Device, f Features) (int, nvml.Return) {
	switch {
	case f.TemperatureV:
		t, ret := dev.GetTemperatureV().V1() // the GPU sensor: SensorType 0 = NVML_TEMPERATURE_GPU
		return int(t.Temperature), ret
	case f.Temperature:
		t, ret := dev.GetTemperature(nvml.TEMPERATURE_GPU)
		return int(t), ret
	}
	return 0, nvml.ERROR_FUNCTION_NOT_FOUND
}

func readClockEventReasons(dev nvml.Device, f Features) (uint64, nvml.Return) {
	switch {
	case f.ClocksEventReasons:
		return dev.GetCurrentClocksEventReasons()
	case f.ClocksThrottleReasons:
		return dev.GetCurrentClocksThrottleReasons()
	}
	return 0, nvml.ERROR_FUNCTION_NOT_FOUND
}
