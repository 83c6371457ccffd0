package gpuinfo

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// fakeGPU is what a mock device reports. returns overrides the answer of a method by name
// ("GetSerial": nvml.ERROR_NOT_SUPPORTED); a method the code must not call is left nil in the
// mock, so calling it panics the test.
type fakeGPU struct {
	name, uuid, serial, busID                            string
	memoryBytes                                          uint64
	memClock, maxMemClock, smClock, maxSMClock, busWidth uint32
	pcieGen, pcieWidth, maxPCIeGen, maxPCIeWidth         int
	ecc                                                  bool
	enforcedPowerMW, managementPowerMW, powerMW          uint32
	temperatureC                                         uint32
	ccMajor, ccMinor                                     int
	reasons                                              uint64
	returns                                              map[string]nvml.Return
}

func (g fakeGPU) ret(method string) nvml.Return {
	if r, ok := g.returns[method]; ok {
		return r
	}
	return nvml.SUCCESS
}

// h100 is an H100 SXM as NVML describes it.
func h100() fakeGPU {
	return fakeGPU{
		name: "NVIDIA H100 80GB HBM3", uuid: "GPU-11111111-2222-3333-4444-555555555555", serial: "1650123456789",
		busID: "00000000:18:00.0", memoryBytes: 81559 << 20,
		memClock: 2619, maxMemClock: 2619, smClock: 1980, maxSMClock: 1980, busWidth: 5120,
		pcieGen: 5, pcieWidth: 16, maxPCIeGen: 5, maxPCIeWidth: 16, ecc: true,
		enforcedPowerMW: 700000, managementPowerMW: 700000, powerMW: 412345, temperatureC: 41,
		ccMajor: 9, ccMinor: 0,
		reasons: nvml.ClocksEventReasonSwPowerCap | nvml.ClocksEventReasonSyncBoost,
	}
}

func (g fakeGPU) device() *mock.Device {
	var busID [32]int8
	for i, c := range []byte(g.busID) {
		busID[i] = int8(c)
	}
	ecc := nvml.FEATURE_DISABLED
	if g.ecc {
		ecc = nvml.FEATURE_ENABLED
	}
	return &mock.Device{
		GetNameFunc:   func() (string, nvml.Return) { return g.name, g.ret("GetName") },
		GetUUIDFunc:   func() (string, nvml.Return) { return g.uuid, g.ret("GetUUID") },
		GetSerialFunc: func() (string, nvml.Return) { return g.serial, g.ret("GetSerial") },
		GetPciInfoFunc: func() (nvml.PciInfo, nvml.Return) {
			return nvml.PciInfo{BusId: busID}, g.ret("GetPciInfo")
		},
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			return nvml.Memory{Total: g.memoryBytes}, g.ret("GetMemoryInfo")
		},
		GetClockInfoFunc: func(c nvml.ClockType) (uint32, nvml.Return) {
			if c == nvml.CLOCK_MEM {
				return g.memClock, g.ret("GetClockInfo")
			}
			return g.smClock, g.ret("GetClockInfo")
		},
		GetMaxClockInfoFunc: func(c nvml.ClockType) (uint32, nvml.Return) {
			if c == nvml.CLOCK_MEM {
				return g.maxMemClock, g.ret("GetMaxClockInfo")
			}
			return g.maxSMClock, g.ret("GetMaxClockInfo")
		},
		GetMemoryBusWidthFunc:         func() (uint32, nvml.Return) { return g.busWidth, g.ret("GetMemoryBusWidth") },
		GetCurrPcieLinkGenerationFunc: func() (int, nvml.Return) { return g.pcieGen, g.ret("GetCurrPcieLinkGeneration") },
		GetCurrPcieLinkWidthFunc:      func() (int, nvml.Return) { return g.pcieWidth, g.ret("GetCurrPcieLinkWidth") },
		GetMaxPcieLinkGenerationFunc:  func() (int, nvml.Return) { return g.maxPCIeGen, g.ret("GetMaxPcieLinkGeneration") },
		GetMaxPcieLinkWidthFunc:       func() (int, nvml.Return) { return g.maxPCIeWidth, g.ret("GetMaxPcieLinkWidth") },
		GetEccModeFunc: func() (nvml.EnableState, nvml.EnableState, nvml.Return) {
			return ecc, ecc, g.ret("GetEccMode")
		},
		GetEnforcedPowerLimitFunc:   func() (uint32, nvml.Return) { return g.enforcedPowerMW, g.ret("GetEnforcedPowerLimit") },
		GetPowerManagementLimitFunc: func() (uint32, nvml.Return) { return g.managementPowerMW, g.ret("GetPowerManagementLimit") },
		GetPowerUsageFunc:           func() (uint32, nvml.Return) { return g.powerMW, g.ret("GetPowerUsage") },
		GetTemperatureFunc: func(s nvml.TemperatureSensors) (uint32, nvml.Return) {
			if s != nvml.TEMPERATURE_GPU {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			return g.temperatureC, g.ret("GetTemperature")
		},
		// GetTemperatureV stays nil: its handler calls the C library directly, which a mock
		// cannot answer, so the mock libraries below never report nvmlDeviceGetTemperatureV.
		GetCudaComputeCapabilityFunc: func() (int, int, nvml.Return) {
			return g.ccMajor, g.ccMinor, g.ret("GetCudaComputeCapability")
		},
		GetCurrentClocksEventReasonsFunc: func() (uint64, nvml.Return) {
			return g.reasons, g.ret("GetCurrentClocksEventReasons")
		},
		GetCurrentClocksThrottleReasonsFunc: func() (uint64, nvml.Return) {
			return g.reasons, g.ret("GetCurrentClocksThrottleReasons")
		},
	}
}

// everySymbolButTemperatureV is a driver with every entry point gpuinfo asks about, except the
// one a mock device cannot serve.
var everySymbolButTemperatureV = map[string]bool{
	"nvmlDeviceGetCurrentClocksEventReasons":    true,
	"nvmlDeviceGetCurrentClocksThrottleReasons": true,
	"nvmlDeviceGetTemperature":                  true,
	"nvmlDeviceGetMemoryBusWidth":               true,
}

// fakeLib is an NVML library with these devices and exported symbols; init is Init's answer.
func fakeLib(init nvml.Return, symbols map[string]bool, devices ...*mock.Device) *mock.Interface {
	return &mock.Interface{
		InitFunc:                       func() nvml.Return { return init },
		ShutdownFunc:                   func() nvml.Return { return nvml.SUCCESS },
		SystemGetDriverVersionFunc:     func() (string, nvml.Return) { return "580.159.03", nvml.SUCCESS },
		SystemGetCudaDriverVersionFunc: func() (int, nvml.Return) { return 13000, nvml.SUCCESS },
		SystemGetNVMLVersionFunc:       func() (string, nvml.Return) { return "13.580.159.03", nvml.SUCCESS },
		DeviceGetCountFunc:             func() (int, nvml.Return) { return len(devices), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if i < 0 || i >= len(devices) {
				return nil, nvml.ERROR_INVALID_ARGUMENT
			}
			return devices[i], nvml.SUCCESS
		},
		ExtensionsFunc: func() nvml.ExtendedInterface {
			return &mock.ExtendedInterface{LookupSymbolFunc: func(name string) error {
				if symbols[name] {
					return nil
				}
				return fmt.Errorf("symbol %q not found", name)
			}}
		},
	}
}
