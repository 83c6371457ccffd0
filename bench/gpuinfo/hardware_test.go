package gpuinfo

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// These tests use whatever libnvidia-ml.so.1 and GPUs this machine has. Without a GPU the ones
// that need one skip with a reason; DECODEBENCH_REQUIRE_GPU=1 (the GPU check script) turns
// that skip into a failure.

func skipOrFailWithoutGPU(t *testing.T, err error) {
	t.Helper()
	if os.Getenv("DECODEBENCH_REQUIRE_GPU") != "" {
		t.Fatalf("DECODEBENCH_REQUIRE_GPU is set but NVML gives no GPU: %v", err)
	}
	t.Skipf("no GPU here: %v", err)
}

// Open must fail with one clear sentence, not a crash, where there is no driver or no GPU.
func TestOpenFailsCleanly(t *testing.T) {
	sys, err := Open()
	if err == nil {
		t.Skipf("this machine has a driver and %d GPU(s): nothing to check here", len(sys.Devices))
	}
	if !errors.Is(err, ErrNoDriver) && !errors.Is(err, ErrNoDevice) {
		t.Errorf("Open() = %v; want ErrNoDriver or ErrNoDevice", err)
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "no NVIDIA driver found") && !strings.HasPrefix(msg, "NVML sees no") {
		t.Errorf("error is not one sentence: %q", msg)
	}
	t.Logf("Open() = %v", err)
}

// A library path that does not exist: the dynamic loader's reason ends the sentence.
func TestOpenMissingLibrary(t *testing.T) {
	_, err := query(nvml.New(nvml.WithLibraryPath("/nonexistent/libnvidia-ml.so.1")), func() string {
		return "/nonexistent/libnvidia-ml.so.1: cannot open shared object file"
	})
	if !errors.Is(err, ErrNoDriver) || !strings.HasSuffix(err.Error(), "could not be loaded): /nonexistent/libnvidia-ml.so.1: cannot open shared object file") {
		t.Errorf("error %v", err)
	}
	if why := whyLibraryMissing(); why != "" {
		t.Logf("dynamic loader on %s: %s", libraryName, why)
	}
}

// Symbol lookups against the installed library (if any) must answer without crashing, even
// where NVML cannot start. Debian's 535.309.01 library, for one, lacks nvmlDeviceGetTemperatureV.
func TestDetectFeaturesOnInstalledLibrary(t *testing.T) {
	lib := nvml.New()
	ret := lib.Init()
	if ret == nvml.ERROR_LIBRARY_NOT_FOUND {
		t.Skipf("%s is not installed", libraryName)
	}
	if ret == nvml.SUCCESS {
		defer lib.Shutdown()
	}
	f := DetectFeatures(lib)
	t.Logf("NVML init: %v; features: %+v", ret, f)
	if !f.ClocksEventReasons && !f.ClocksThrottleReasons {
		t.Errorf("the installed library exports neither clocks-reasons entry point: %+v", f)
	}
}

func TestOpenOnGPU(t *testing.T) {
	sys, err := Open()
	if err != nil {
		skipOrFailWithoutGPU(t, err)
	}
	t.Logf("driver %s, CUDA %s, NVML %s, features %+v", sys.Driver, sys.CUDADriverVersion, sys.NVMLVersion, sys.Features)
	for _, d := range sys.Devices {
		t.Logf("%+v", d)
		if d.Name == "" || d.UUID == "" || d.MemoryTotalBytes == 0 {
			t.Errorf("GPU %d: identity missing: %+v", d.Index, d)
		}
		if d.DatasheetBandwidthBytesPerSec < 100e9 {
			t.Errorf("GPU %d: datasheet bandwidth %g B/s from %d MHz x %d bit", d.Index, d.DatasheetBandwidthBytesPerSec, d.MaxMemClockMHz, d.MemBusWidthBits)
		}
	}

	lib := nvml.New()
	if ret := lib.Init(); ret != nvml.SUCCESS {
		t.Fatalf("NVML init: %v", ret)
	}
	defer lib.Shutdown()
	f := DetectFeatures(lib)
	dev, ret := lib.DeviceGetHandleByIndex(0)
	if ret != nvml.SUCCESS {
		t.Fatalf("GPU 0: %v", ret)
	}
	tel, err := ReadTelemetry(dev, f)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("telemetry: %+v", tel)
	if tel.SMClockMHz == 0 || tel.MemClockMHz == 0 {
		t.Errorf("no clocks: %+v", tel)
	}
}
