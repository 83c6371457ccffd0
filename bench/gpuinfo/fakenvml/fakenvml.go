// Package fakenvml is an NVML library of simulated GPUs, built on go-nvml's mocks, whose every
// reading a test (or `decodebench validate --simulate-gpus`) can set, including while a
// validation runs. It answers every entry point bench/gpuinfo calls except
// nvmlDeviceGetTemperatureV, which a mock cannot serve (go-nvml's handler calls C directly), so
// its library reports that symbol missing.
//
// The faults a box shows in production are states of a GPU: a card that fell off the bus
// (Lost), one NVML cannot open at all (HandleError), one reporting half its memory
// (MemoryBytes), two cards with one UUID or an empty one (UUID), any single reading failing
// (Returns). OnCall lets a test hold a call to make a phase of its caller last.
package fakenvml

import (
	"fmt"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// GPU is one simulated card. Change it with Set while a library built on it is in use.
type GPU struct {
	mu sync.Mutex
	State
}

// State is everything a simulated card reports.
type State struct {
	Name, UUID, Serial, BusID                                            string
	MemoryBytes                                                          uint64
	MemClockMHz, MaxMemClockMHz, SMClockMHz, MaxSMClockMHz, BusWidthBits uint32
	CCMajor, CCMinor                                                     int

	PCIeGen, PCIeWidth, MaxPCIeGen, MaxPCIeWidth, GPUMaxPCIeGen int

	ECCSupported, ECC, ECCPending                                bool
	VolatileUncorrected, AggregateUncorrected, VolatileCorrected uint64
	RetiredPagesSupported                                        bool
	RetiredSingleBit, RetiredDoubleBit                           int
	RetiredPending                                               bool
	RowRemapSupported                                            bool
	RemappedCorrectable, RemappedUncorrectable                   int
	RemapPending, RemapFailed                                    bool

	TemperatureC, SlowdownC, ShutdownC, GPUMaxC        uint32
	PowerMW, EnforcedPowerLimitMW, DefaultPowerLimitMW uint32
	// ManagementPowerLimitMW is nvmlDeviceGetPowerManagementLimit's answer (the limit set), the
	// fallback for drivers without the enforced one.
	ManagementPowerLimitMW uint32
	ClocksEventReasons     uint64
	Processes              []nvml.ProcessInfo

	// Lost is a card that fell off the bus (Xid 79): every reading fails with
	// ERROR_GPU_IS_LOST but the PCI info and the UUID, which the driver kept from when it
	// attached the card (Returns can take those away too).
	Lost bool
	// HandleError, when not SUCCESS, is what DeviceGetHandleByIndex and ByUUID answer for the
	// card: NVML cannot open it at all (ERROR_GPU_IS_LOST, ERROR_UNKNOWN, ...).
	HandleError nvml.Return
	// Returns overrides the answer of single methods by name ("GetSerial":
	// ERROR_NOT_SUPPORTED); the value read is then left as it is.
	Returns map[string]nvml.Return
	// OnCall, when set, is called with the method's name ("GetRemappedRows") before each call
	// on the card is answered, outside the card's lock: a test blocks there to hold its caller
	// in one phase.
	OnCall func(method string)
}

// H100 is a healthy H100 SXM5 80GB, numbered i (UUID, serial and bus ID differ by i).
func H100(i int) *GPU {
	return &GPU{State: State{
		Name: "NVIDIA H100 80GB HBM3", UUID: fmt.Sprintf("GPU-00000000-0000-4000-8000-%012d", i),
		Serial: fmt.Sprintf("16501234%05d", i), BusID: fmt.Sprintf("00000000:%02X:00.0", 0x18+0x10*i),
		MemoryBytes: 81559 << 20, MemClockMHz: 2619, MaxMemClockMHz: 2619, SMClockMHz: 1980, MaxSMClockMHz: 1980,
		BusWidthBits: 5120, CCMajor: 9, CCMinor: 0,
		PCIeGen: 5, PCIeWidth: 16, MaxPCIeGen: 5, MaxPCIeWidth: 16, GPUMaxPCIeGen: 5,
		ECCSupported: true, ECC: true, ECCPending: true, RowRemapSupported: true,
		TemperatureC: 38, SlowdownC: 87, ShutdownC: 92, GPUMaxC: 85,
		PowerMW: 120000, EnforcedPowerLimitMW: 700000, DefaultPowerLimitMW: 700000, ManagementPowerLimitMW: 700000,
		ClocksEventReasons: nvml.ClocksEventReasonGpuIdle,
		Processes:          []nvml.ProcessInfo{},
	}}
}

// Set changes g under its lock.
func (g *GPU) Set(change func(s *State)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	change(&g.State)
}

// read returns a copy of g's state and the Return a call of method gives.
func (g *GPU) read(method string) (State, nvml.Return) {
	g.mu.Lock()
	hook := g.OnCall
	g.mu.Unlock()
	if hook != nil {
		hook(method)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.State
	s.Processes = append([]nvml.ProcessInfo{}, g.Processes...)
	if ret, ok := g.Returns[method]; ok {
		return s, ret
	}
	if g.Lost && method != "GetPciInfo" && method != "GetUUID" {
		return s, nvml.ERROR_GPU_IS_LOST
	}
	return s, nvml.SUCCESS
}

// handle is what NVML answers when asked for the card's handle.
func (g *GPU) handle() nvml.Return {
	_, ret := g.read("DeviceGetHandle")
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.HandleError != 0 && g.HandleError != nvml.SUCCESS {
		return g.HandleError
	}
	if ret == nvml.ERROR_GPU_IS_LOST {
		return nvml.SUCCESS // a lost card still has a handle; its readings fail
	}
	return ret
}

func enable(on bool) nvml.EnableState {
	if on {
		return nvml.FEATURE_ENABLED
	}
	return nvml.FEATURE_DISABLED
}

func supported(ok bool, ret nvml.Return) nvml.Return {
	if ret == nvml.SUCCESS && !ok {
		return nvml.ERROR_NOT_SUPPORTED
	}
	return ret
}

// Device is g as an nvml.Device.
func (g *GPU) Device() *mock.Device {
	return &mock.Device{
		GetNameFunc:   func() (string, nvml.Return) { s, ret := g.read("GetName"); return s.Name, ret },
		GetUUIDFunc:   func() (string, nvml.Return) { s, ret := g.read("GetUUID"); return s.UUID, ret },
		GetSerialFunc: func() (string, nvml.Return) { s, ret := g.read("GetSerial"); return s.Serial, ret },
		GetPciInfoFunc: func() (nvml.PciInfo, nvml.Return) {
			s, ret := g.read("GetPciInfo")
			var info nvml.PciInfo
			for i, c := range []byte(s.BusID) {
				info.BusId[i] = int8(c)
			}
			return info, ret
		},
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			s, ret := g.read("GetMemoryInfo")
			return nvml.Memory{Total: s.MemoryBytes}, ret
		},
		GetClockInfoFunc: func(c nvml.ClockType) (uint32, nvml.Return) {
			s, ret := g.read("GetClockInfo")
			if c == nvml.CLOCK_MEM {
				return s.MemClockMHz, ret
			}
			return s.SMClockMHz, ret
		},
		GetMaxClockInfoFunc: func(c nvml.ClockType) (uint32, nvml.Return) {
			s, ret := g.read("GetMaxClockInfo")
			if c == nvml.CLOCK_MEM {
				return s.MaxMemClockMHz, ret
			}
			return s.MaxSMClockMHz, ret
		},
		GetMemoryBusWidthFunc:         func() (uint32, nvml.Return) { s, ret := g.read("GetMemoryBusWidth"); return s.BusWidthBits, ret },
		GetCurrPcieLinkGenerationFunc: func() (int, nvml.Return) { s, ret := g.read("GetCurrPcieLinkGeneration"); return s.PCIeGen, ret },
		GetCurrPcieLinkWidthFunc:      func() (int, nvml.Return) { s, ret := g.read("GetCurrPcieLinkWidth"); return s.PCIeWidth, ret },
		GetMaxPcieLinkGenerationFunc:  func() (int, nvml.Return) { s, ret := g.read("GetMaxPcieLinkGeneration"); return s.MaxPCIeGen, ret },
		GetMaxPcieLinkWidthFunc:       func() (int, nvml.Return) { s, ret := g.read("GetMaxPcieLinkWidth"); return s.MaxPCIeWidth, ret },
		GetGpuMaxPcieLinkGenerationFunc: func() (int, nvml.Return) {
			s, ret := g.read("GetGpuMaxPcieLinkGeneration")
			return s.GPUMaxPCIeGen, ret
		},
		GetEccModeFunc: func() (nvml.EnableState, nvml.EnableState, nvml.Return) {
			s, ret := g.read("GetEccMode")
			return enable(s.ECC), enable(s.ECCPending), supported(s.ECCSupported, ret)
		},
		GetTotalEccErrorsFunc: func(kind nvml.MemoryErrorType, counter nvml.EccCounterType) (uint64, nvml.Return) {
			s, ret := g.read("GetTotalEccErrors")
			switch {
			case kind == nvml.MEMORY_ERROR_TYPE_UNCORRECTED && counter == nvml.VOLATILE_ECC:
				return s.VolatileUncorrected, ret
			case kind == nvml.MEMORY_ERROR_TYPE_UNCORRECTED:
				return s.AggregateUncorrected, ret
			case counter == nvml.VOLATILE_ECC:
				return s.VolatileCorrected, ret
			}
			return 0, ret
		},
		GetRetiredPagesFunc: func(cause nvml.PageRetirementCause) ([]uint64, nvml.Return) {
			s, ret := g.read("GetRetiredPages")
			n := s.RetiredSingleBit
			if cause == nvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR {
				n = s.RetiredDoubleBit
			}
			return make([]uint64, n), supported(s.RetiredPagesSupported, ret)
		},
		GetRetiredPagesPendingStatusFunc: func() (nvml.EnableState, nvml.Return) {
			s, ret := g.read("GetRetiredPagesPendingStatus")
			return enable(s.RetiredPending), supported(s.RetiredPagesSupported, ret)
		},
		GetRemappedRowsFunc: func() (int, int, bool, bool, nvml.Return) {
			s, ret := g.read("GetRemappedRows")
			return s.RemappedCorrectable, s.RemappedUncorrectable, s.RemapPending, s.RemapFailed, supported(s.RowRemapSupported, ret)
		},
		GetTemperatureFunc: func(sensor nvml.TemperatureSensors) (uint32, nvml.Return) {
			s, ret := g.read("GetTemperature")
			return s.TemperatureC, ret
		},
		GetTemperatureThresholdFunc: func(kind nvml.TemperatureThresholds) (uint32, nvml.Return) {
			s, ret := g.read("GetTemperatureThreshold")
			switch kind {
			case nvml.TEMPERATURE_THRESHOLD_SLOWDOWN:
				return s.SlowdownC, ret
			case nvml.TEMPERATURE_THRESHOLD_SHUTDOWN:
				return s.ShutdownC, ret
			case nvml.TEMPERATURE_THRESHOLD_GPU_MAX:
				return s.GPUMaxC, ret
			}
			return 0, nvml.ERROR_NOT_SUPPORTED
		},
		GetPowerUsageFunc: func() (uint32, nvml.Return) { s, ret := g.read("GetPowerUsage"); return s.PowerMW, ret },
		GetEnforcedPowerLimitFunc: func() (uint32, nvml.Return) {
			s, ret := g.read("GetEnforcedPowerLimit")
			return s.EnforcedPowerLimitMW, ret
		},
		GetPowerManagementLimitFunc: func() (uint32, nvml.Return) {
			s, ret := g.read("GetPowerManagementLimit")
			return s.ManagementPowerLimitMW, ret
		},
		GetPowerManagementDefaultLimitFunc: func() (uint32, nvml.Return) {
			s, ret := g.read("GetPowerManagementDefaultLimit")
			return s.DefaultPowerLimitMW, ret
		},
		GetCudaComputeCapabilityFunc: func() (int, int, nvml.Return) {
			s, ret := g.read("GetCudaComputeCapability")
			return s.CCMajor, s.CCMinor, ret
		},
		GetCurrentClocksEventReasonsFunc: func() (uint64, nvml.Return) {
			s, ret := g.read("GetCurrentClocksEventReasons")
			return s.ClocksEventReasons, ret
		},
		GetCurrentClocksThrottleReasonsFunc: func() (uint64, nvml.Return) {
			s, ret := g.read("GetCurrentClocksThrottleReasons")
			return s.ClocksEventReasons, ret
		},
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			s, ret := g.read("GetComputeRunningProcesses")
			return s.Processes, ret
		},
	}
}

// Symbols are the entry points the simulated driver exports: all that bench/gpuinfo asks about
// but nvmlDeviceGetTemperatureV.
var Symbols = []string{
	"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons",
	"nvmlDeviceGetTemperature", "nvmlDeviceGetMemoryBusWidth",
	"nvmlDeviceGetEccMode", "nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetRetiredPages",
	"nvmlDeviceGetRetiredPagesPendingStatus", "nvmlDeviceGetRemappedRows",
	"nvmlDeviceGetCurrPcieLinkGeneration", "nvmlDeviceGetCurrPcieLinkWidth",
	"nvmlDeviceGetMaxPcieLinkGeneration", "nvmlDeviceGetMaxPcieLinkWidth",
	"nvmlDeviceGetGpuMaxPcieLinkGeneration", "nvmlDeviceGetTemperatureThreshold",
	"nvmlDeviceGetPowerUsage", "nvmlDeviceGetEnforcedPowerLimit",
	"nvmlDeviceGetPowerManagementDefaultLimit", "nvmlDeviceGetComputeRunningProcesses_v3",
}

// Library is an NVML library of these GPUs, driver 580, exporting Symbols.
func Library(gpus ...*GPU) *mock.Interface { return Driver{}.Library(gpus...) }

// Driver is how the simulated driver differs from a current one that works.
type Driver struct {
	// Init is nvmlInit's answer: ERROR_LIBRARY_NOT_FOUND, ERROR_DRIVER_NOT_LOADED, ...
	Init nvml.Return
	// Symbols are the entry points it exports (nil: Symbols): an older driver lacks some, and
	// bench/gpuinfo must not call those.
	Symbols []string
	// Edit, when set, changes the mock of GPU i after it is built: set a method nil to make
	// the test panic if it is called.
	Edit func(i int, d *mock.Device)
}

// Library is an NVML library of these GPUs, as d says.
func (d Driver) Library(gpus ...*GPU) *mock.Interface {
	devices := make([]nvml.Device, len(gpus))
	for i, g := range gpus {
		dev := g.Device()
		if d.Edit != nil {
			d.Edit(i, dev)
		}
		devices[i] = dev
	}
	symbols := d.Symbols
	if symbols == nil {
		symbols = Symbols
	}
	exported := map[string]bool{}
	for _, s := range symbols {
		exported[s] = true
	}
	return &mock.Interface{
		InitFunc:                       func() nvml.Return { return d.Init },
		ShutdownFunc:                   func() nvml.Return { return nvml.SUCCESS },
		SystemGetDriverVersionFunc:     func() (string, nvml.Return) { return "580.159.03", nvml.SUCCESS },
		SystemGetCudaDriverVersionFunc: func() (int, nvml.Return) { return 13000, nvml.SUCCESS },
		SystemGetNVMLVersionFunc:       func() (string, nvml.Return) { return "13.580.159.03", nvml.SUCCESS },
		DeviceGetCountFunc:             func() (int, nvml.Return) { return len(devices), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if i < 0 || i >= len(devices) {
				return nil, nvml.ERROR_INVALID_ARGUMENT
			}
			if ret := gpus[i].handle(); ret != nvml.SUCCESS {
				return nil, ret
			}
			return devices[i], nvml.SUCCESS
		},
		DeviceGetHandleByUUIDFunc: func(uuid string) (nvml.Device, nvml.Return) {
			for i, g := range gpus {
				if s, _ := g.read("DeviceGetHandleByUUID"); s.UUID == uuid && uuid != "" {
					if ret := g.handle(); ret != nvml.SUCCESS {
						return nil, ret
					}
					return devices[i], nvml.SUCCESS
				}
			}
			return nil, nvml.ERROR_NOT_FOUND
		},
		ExtensionsFunc: func() nvml.ExtendedInterface {
			return &mock.ExtendedInterface{LookupSymbolFunc: func(name string) error {
				if exported[name] {
					return nil
				}
				return fmt.Errorf("symbol %q not found", name)
			}}
		},
	}
}
