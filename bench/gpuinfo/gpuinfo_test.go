package gpuinfo

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/decodebench/decodebench/bench/gpuinfo/fakenvml"
)

func TestQueryFull(t *testing.T) {
	lib := fakeLib(nvml.SUCCESS, nil, h100())
	sys, err := Query(lib)
	if err != nil {
		t.Fatal(err)
	}
	if sys.Driver != "580.159.03" || sys.CUDADriverVersion != "13.0" || sys.NVMLVersion != "13.580.159.03" {
		t.Errorf("system: %+v", sys)
	}
	wantFeatures := Features{ClocksEventReasons: true, ClocksThrottleReasons: true, Temperature: true, MemoryBusWidth: true}
	if sys.Features != wantFeatures {
		t.Errorf("features %+v, want %+v", sys.Features, wantFeatures)
	}
	if len(sys.Devices) != 1 {
		t.Fatalf("%d devices", len(sys.Devices))
	}
	want := Device{
		Index: 0, UUID: "GPU-00000000-0000-4000-8000-000000000000", Name: "NVIDIA H100 80GB HBM3",
		Serial: "1650123400000", PCIBusID: "00000000:18:00.0", MemoryTotalBytes: 81559 << 20,
		MemClockMHz: 2619, MaxMemClockMHz: 2619, SMClockMHz: 1980, MaxSMClockMHz: 1980, MemBusWidthBits: 5120,
		DatasheetBandwidthBytesPerSec: 2619e6 * 5120 / 8 * 2,
		PCIeGen:                       5, PCIeWidth: 16, MaxPCIeGen: 5, MaxPCIeWidth: 16,
		ECCEnabled: true, PowerLimitWatts: 700, TemperatureC: 41, ComputeCapability: "9.0",
	}
	if got := sys.Devices[0]; !reflect.DeepEqual(got, want) {
		t.Errorf("device\n got %+v\nwant %+v", got, want)
	}
	if len(lib.InitCalls()) != 1 || len(lib.ShutdownCalls()) != 1 {
		t.Errorf("Init called %d times, Shutdown %d; want once each", len(lib.InitCalls()), len(lib.ShutdownCalls()))
	}
}

func TestQuerySeveralDevices(t *testing.T) {
	second := set(h100(), func(s *fakenvml.State) { s.UUID = "GPU-second" })
	sys, err := Query(fakeLib(nvml.SUCCESS, nil, h100(), second))
	if err != nil {
		t.Fatal(err)
	}
	if len(sys.Devices) != 2 || sys.Devices[1].Index != 1 || sys.Devices[1].UUID != "GPU-second" {
		t.Errorf("devices: %+v", sys.Devices)
	}
}

// A GeForce-like card on an older driver: several fields NVML cannot give.
func TestQueryNotSupportedStaysZero(t *testing.T) {
	g := set(h100(), func(s *fakenvml.State) {
		s.Returns = map[string]nvml.Return{
			"GetSerial":                nvml.ERROR_NOT_SUPPORTED,
			"GetEccMode":               nvml.ERROR_NOT_SUPPORTED,
			"GetEnforcedPowerLimit":    nvml.ERROR_NOT_SUPPORTED, // falls back to the management limit
			"GetMaxPcieLinkGeneration": nvml.ERROR_NOT_SUPPORTED,
			"GetMaxPcieLinkWidth":      nvml.ERROR_NO_PERMISSION,
		}
		s.ManagementPowerLimitMW = 450000
		s.ECC = true // must not show: the call failed
	})
	// The driver lacks nvmlDeviceGetMemoryBusWidth: calling it would panic.
	driver := fakenvml.Driver{Symbols: []string{"nvmlDeviceGetTemperature"},
		Edit: func(_ int, d *mock.Device) { d.GetMemoryBusWidthFunc = nil }}
	sys, err := Query(driver.Library(g))
	if err != nil {
		t.Fatalf("Query failed on unsupported fields: %v", err)
	}
	got := sys.Devices[0]
	if got.Serial != "" || got.ECCEnabled || got.MaxPCIeGen != 0 || got.MaxPCIeWidth != 0 ||
		got.MemBusWidthBits != 0 || got.DatasheetBandwidthBytesPerSec != 0 {
		t.Errorf("unsupported fields not zero: %+v", got)
	}
	if got.PowerLimitWatts != 450 || got.Name != g.Name || got.MaxMemClockMHz != 2619 || got.TemperatureC != 41 {
		t.Errorf("supported fields lost: %+v", got)
	}
	wantMissing := []string{"serial", "memory bus width", "max PCIe generation", "max PCIe width", "ECC mode"}
	if len(got.Unavailable) != len(wantMissing) {
		t.Errorf("unavailable %q, want %q", got.Unavailable, wantMissing)
	}
	for _, field := range wantMissing {
		if !slices.ContainsFunc(got.Unavailable, func(s string) bool { return strings.HasPrefix(s, field+": ") }) {
			t.Errorf("unavailable %q does not name %q", got.Unavailable, field)
		}
	}
}

// A card NVML cannot read is in the system, lost, with the reason and whatever identity NVML
// still gave; the card after it is read as usual.
func TestQueryFailures(t *testing.T) {
	tests := []struct {
		desc     string
		returns  map[string]nvml.Return
		want     []string // in Lost
		wantUUID string
	}{
		{"name", map[string]nvml.Return{"GetName": nvml.ERROR_UNKNOWN}, []string{"name"}, h100().UUID},
		{"UUID", map[string]nvml.Return{"GetUUID": nvml.ERROR_GPU_IS_LOST}, []string{"UUID", "lost"}, ""},
		{"memory", map[string]nvml.Return{"GetMemoryInfo": nvml.ERROR_NOT_SUPPORTED}, []string{"memory size"}, h100().UUID},
		{"lost GPU on an optional field", map[string]nvml.Return{"GetEccMode": nvml.ERROR_GPU_IS_LOST}, []string{"ECC mode", "lost"}, h100().UUID},
	}
	for _, tc := range tests {
		g := set(h100(), func(s *fakenvml.State) { s.Returns = tc.returns })
		second := set(h100(), func(s *fakenvml.State) { s.UUID = "GPU-second" })
		sys, err := Query(fakeLib(nvml.SUCCESS, nil, g, second))
		if err != nil || len(sys.Devices) != 2 {
			t.Errorf("%s: Query: %v, %d devices; want both cards, the first lost", tc.desc, err, len(sys.Devices))
			continue
		}
		d := sys.Devices[0]
		for _, w := range tc.want {
			if !strings.Contains(strings.ToLower(d.Lost), strings.ToLower(w)) {
				t.Errorf("%s: Lost %q does not say %q", tc.desc, d.Lost, w)
			}
		}
		if d.Index != 0 || d.UUID != tc.wantUUID || d.PCIBusID != "00000000:18:00.0" || d.MemClockMHz != 0 {
			t.Errorf("%s: lost card %+v: want index 0, UUID %q, the bus id and nothing else read", tc.desc, d, tc.wantUUID)
		}
		if u := sys.Usable(); len(u) != 1 || u[0].UUID != "GPU-second" || u[0].Lost != "" {
			t.Errorf("%s: usable %+v, want the second card", tc.desc, u)
		}
	}
	// A card NVML cannot even open.
	lib := fakeLib(nvml.SUCCESS, nil, h100())
	lib.DeviceGetHandleByIndexFunc = func(int) (nvml.Device, nvml.Return) { return nil, nvml.ERROR_GPU_IS_LOST }
	sys, err := Query(lib)
	if err != nil || len(sys.Devices) != 1 || !strings.Contains(sys.Devices[0].Lost, "NVML cannot open it") || !strings.Contains(strings.ReplaceAll(strings.ToLower(sys.Devices[0].Lost), "_", " "), "gpu is lost") {
		t.Errorf("no handle: %v, %+v", err, sys.Devices)
	}
}

func TestQueryInitFailure(t *testing.T) {
	tests := []struct {
		desc       string
		init       nvml.Return
		noDriver   bool
		wantPrefix string
	}{
		{"library missing", nvml.ERROR_LIBRARY_NOT_FOUND, true, "no NVIDIA driver found (libnvidia-ml.so.1 could not be loaded): "},
		{"kernel driver missing", nvml.ERROR_DRIVER_NOT_LOADED, true, "no NVIDIA driver found (libnvidia-ml.so.1 is installed but the NVIDIA kernel driver is not loaded)"},
		{"other", nvml.ERROR_NO_PERMISSION, false, "NVML init failed: "},
	}
	for _, tc := range tests {
		lib := fakeLib(tc.init, nil, h100())
		_, err := Query(lib)
		if err == nil || errors.Is(err, ErrNoDriver) != tc.noDriver || !strings.HasPrefix(err.Error(), tc.wantPrefix) {
			t.Errorf("%s: error %v; want ErrNoDriver %v and prefix %q", tc.desc, err, tc.noDriver, tc.wantPrefix)
		}
		if n := len(lib.ShutdownCalls()); n != 0 {
			t.Errorf("%s: Shutdown called %d times after a failed Init", tc.desc, n)
		}
	}
}

func TestQueryNoDevice(t *testing.T) {
	sys, err := Query(fakeLib(nvml.SUCCESS, nil))
	if !errors.Is(err, ErrNoDevice) {
		t.Fatalf("error %v, want ErrNoDevice", err)
	}
	if sys.Driver != "580.159.03" {
		t.Errorf("driver fields lost: %+v", sys)
	}
}

// NVML's maximum memory clock x bus width x 2 against the datasheets, for the clocks nvidia-smi
// reports on these cards.
func TestDDRBandwidthMatchesDatasheets(t *testing.T) {
	tests := []struct {
		card           string
		clockMHz, bits uint32
		datasheet      float64
		tolerance      float64
	}{
		{"H100 SXM (HBM3)", 2619, 5120, 3.35e12, 0.001},
		{"A100 40GB (HBM2)", 1215, 5120, 1.555e12, 0.001},
		{"A100 80GB SXM (HBM2e)", 1593, 5120, 2.039e12, 0.001},
		{"RTX 4090 (GDDR6X)", 10501, 384, 1.008e12, 0.001},
		{"A10 (GDDR6)", 6251, 384, 600e9, 0.001},
		{"L4 (GDDR6)", 6251, 192, 300e9, 0.001},
		{"L40S (GDDR6)", 9001, 384, 864e9, 0.001},
		// nvidia-smi read a 3201 MHz memory clock on an H200 here (2026-10-28); 6144 bits is six
		// HBM3e stacks, not yet read from NVML. That gives 4.92 TB/s, 2.4% over the datasheet.
		{"H200 (HBM3e)", 3201, 6144, 4.8e12, 0.03},
	}
	for _, tc := range tests {
		got := DDRBandwidthBytesPerSec(tc.clockMHz, tc.bits)
		if math.Abs(got/tc.datasheet-1) > tc.tolerance {
			t.Errorf("%s: %d MHz x %d bit = %.4g B/s, datasheet %.4g", tc.card, tc.clockMHz, tc.bits, got, tc.datasheet)
		}
	}
	if got := DDRBandwidthBytesPerSec(2619, 5120); got != 3.35232e12 {
		t.Errorf("H100 exact: %g", got)
	}
}

func TestCString(t *testing.T) {
	in := []int8{'a', 'b', 0, 'c'}
	if got := cString(in); got != "ab" {
		t.Errorf("cString = %q", got)
	}
	if got := cString([]int8{'x', 'y'}); got != "xy" {
		t.Errorf("unterminated: %q", got)
	}
}
