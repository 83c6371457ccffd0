package telemetry

import (
	"fmt"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/decodebench/decodebench/bench/gpuinfo"
)

// NVML is a Source that reads one GPU through NVML. It holds NVML initialized from Open to
// Close (NVML counts its Init calls, so gpuinfo.Query may run beside it).
type NVML struct {
	lib      nvml.Interface
	dev      nvml.Device
	features gpuinfo.Features
	uuid     string

	closeOnce sync.Once
}

// OpenNVML starts NVML through lib (nvml.New() outside tests) and finds the GPU with this UUID
// ("GPU-..."). It fails when NVML cannot start or has no such GPU.
func OpenNVML(lib nvml.Interface, uuid string) (*NVML, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("telemetry: NVML init: %v", ret)
	}
	dev, ret := lib.DeviceGetHandleByUUID(uuid)
	if ret != nvml.SUCCESS {
		lib.Shutdown()
		return nil, fmt.Errorf("telemetry: NVML has no GPU %s: %v", uuid, ret)
	}
	return &NVML{lib: lib, dev: dev, features: gpuinfo.DetectFeatures(lib), uuid: uuid}, nil
}

// Read takes one reading (see gpuinfo.ReadTelemetry).
func (n *NVML) Read() (gpuinfo.Telemetry, error) {
	t, err := gpuinfo.ReadTelemetry(n.dev, n.features)
	if err != nil {
		return t, fmt.Errorf("GPU %s: %w", n.uuid, err)
	}
	return t, nil
}

// Close shuts NVML down once.
func (n *NVML) Close() error {
	var err error
	n.closeOnce.Do(func() {
		if ret := n.lib.Shutdown(); ret != nvml.SUCCESS {
			err = fmt.Errorf("telemetry: NVML shutdown: %v", ret)
		}
	})
	return err
}

// Func adapts a function to a Source (tests, and scripted fault injection).
type Func func() (gpuinfo.Telemetry, error)

// Read calls f.
func (f Func) Read() (gpuinfo.Telemetry, error) { return f() }
