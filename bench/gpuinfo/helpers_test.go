package gpuinfo

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/decodebench/decodebench/bench/gpuinfo/fakenvml"
)

// h100 is the simulated H100 SXM of package fakenvml (the one fake the whole project uses)
// caught at work: 41 °C, drawing 412.345 W at its software power cap.
func h100() *fakenvml.GPU {
	g := fakenvml.H100(0)
	g.Set(func(s *fakenvml.State) {
		s.TemperatureC, s.PowerMW = 41, 412345
		s.ClocksEventReasons = nvml.ClocksEventReasonSwPowerCap | nvml.ClocksEventReasonSyncBoost
	})
	return g
}

// set changes g and returns it.
func set(g *fakenvml.GPU, change func(s *fakenvml.State)) *fakenvml.GPU {
	g.Set(change)
	return g
}

// fakeLib is an NVML library of these GPUs whose Init answers init and which exports symbols
// (nil: every entry point gpuinfo asks about but nvmlDeviceGetTemperatureV, which a mock
// cannot serve).
func fakeLib(init nvml.Return, symbols []string, gpus ...*fakenvml.GPU) *mock.Interface {
	return fakenvml.Driver{Init: init, Symbols: symbols}.Library(gpus...)
}
