// Package gpuinfo reads the identity, limits and health of the GPUs through NVML (go-nvml).
// Every function takes the nvml.Interface or nvml.Device it reads, so tests run on go-nvml's
// mocks (pkg/nvml/mock) and need neither a GPU nor a driver.
package gpuinfo

import (
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/dl"
	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// libraryName is the library nvml.New() opens.
const libraryName = "libnvidia-ml.so.1"

// ErrNoDriver means NVML could not start: libnvidia-ml.so.1 is missing, or it is installed but
// the NVIDIA kernel driver is not loaded. The wrapping error says which.
var ErrNoDriver = errors.New("no NVIDIA driver found")

// ErrNoDevice means NVML started but sees no GPU.
var ErrNoDevice = errors.New("NVML sees no NVIDIA GPU")

// System is what NVML says about the machine.
type System struct {
	Driver            string   `json:"driver"`              // "580.159.03"
	CUDADriverVersion string   `json:"cuda_driver_version"` // the CUDA version the driver supports: "13.0"
	NVMLVersion       string   `json:"nvml_version"`
	Features          Features `json:"nvml_features"` // which newer entry points the driver has
	Devices           []Device `json:"devices"`
	// Unavailable lists the system fields NVML could not give, with its reason.
	Unavailable []string `json:"unavailable,omitempty"`
}

// Device is one GPU. A field NVML cannot give on this GPU or driver (not supported, no
// permission, an entry point the driver lacks) stays zero and is named in Unavailable.
type Device struct {
	Index            int    `json:"index"`
	UUID             string `json:"uuid"`
	Name             string `json:"name"` // NVML product name: "NVIDIA H200"
	Serial           string `json:"serial,omitempty"`
	PCIBusID         string `json:"pci_bus_id"`
	MemoryTotalBytes uint64 `json:"memory_total_bytes"`

	MemClockMHz     uint32 `json:"mem_clock_mhz"` // now
	MaxMemClockMHz  uint32 `json:"max_mem_clock_mhz"`
	SMClockMHz      uint32 `json:"sm_clock_mhz"` // now
	MaxSMClockMHz   uint32 `json:"max_sm_clock_mhz"`
	MemBusWidthBits uint32 `json:"mem_bus_width_bits"`
	// DatasheetBandwidthBytesPerSec = DDRBandwidthBytesPerSec(MaxMemClockMHz, MemBusWidthBits).
	DatasheetBandwidthBytesPerSec float64 `json:"datasheet_bandwidth_bytes_per_s"`

	PCIeGen      int `json:"pcie_gen"` // current link; an idle GPU may train down
	PCIeWidth    int `json:"pcie_width"`
	MaxPCIeGen   int `json:"max_pcie_gen"` // the most this GPU and this slot allow
	MaxPCIeWidth int `json:"max_pcie_width"`

	ECCEnabled        bool    `json:"ecc_enabled"`
	PowerLimitWatts   float64 `json:"power_limit_watts"` // enforced limit
	TemperatureC      int     `json:"temperature_c"`
	ComputeCapability string  `json:"compute_capability"` // "9.0"

	Unavailable []string `json:"unavailable,omitempty"`
	// Lost, when set, says why NVML could not read the card: it fell off the bus (NVML answers
	// ERROR_GPU_IS_LOST) or cannot be opened. Only Index and what NVML still gave (the PCI bus
	// id and the UUID, which the driver keeps from when it attached the card) are filled.
	Lost string `json:"lost,omitempty"`
}

// DDRBandwidthBytesPerSec is the memory bandwidth implied by NVML's maximum memory clock and
// bus width: clock (MHz) x 1e6 x (bus width / 8) bytes x 2 transfers per clock. NVML reports the
// clock of HBM and GDDR so that this holds: H100 SXM 2619 MHz x 5120 bit = 3.35 TB/s; A100 40GB
// 1215 MHz x 5120 bit = 1.555 TB/s; RTX 4090 10501 MHz x 384 bit = 1.008 TB/s.
func DDRBandwidthBytesPerSec(memClockMHz, busWidthBits uint32) float64 {
	return float64(memClockMHz) * 1e6 * float64(busWidthBits) / 8 * 2
}

// Open loads libnvidia-ml.so.1 (through nvml.New) and queries it. On a machine without the
// driver it returns an error wrapping ErrNoDriver that says what was missing; it never panics.
func Open() (System, error) {
	return query(nvml.New(), whyLibraryMissing)
}

// whyLibraryMissing asks the dynamic loader why libnvidia-ml.so.1 would not load, since
// nvml.Init only answers ERROR_LIBRARY_NOT_FOUND.
func whyLibraryMissing() string {
	lib := dl.New(libraryName, dl.RTLD_LAZY|dl.RTLD_LOCAL)
	if err := lib.Open(); err != nil {
		return err.Error()
	}
	_ = lib.Close()
	return ""
}

// Query initializes NVML through lib, reads the system and every device, and shuts NVML down.
// It fails when NVML cannot start (ErrNoDriver for a missing library or driver) and when there
// is no GPU (ErrNoDevice, with the driver fields of System still filled). A card NVML cannot
// open, or whose handle, name, UUID or memory size cannot be read, or one of whose readings
// fails for another reason than "not supported", "no permission" or a missing entry point, is
// in Devices with Lost saying why: one card off the bus must not hide the others.
func Query(lib nvml.Interface) (System, error) {
	return query(lib, nil)
}

func query(lib nvml.Interface, whyMissing func() string) (System, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return System{}, initError(ret, whyMissing)
	}
	defer lib.Shutdown()

	var sys System
	sys.Features = DetectFeatures(lib)
	r := reads{}
	if v, ret := lib.SystemGetDriverVersion(); r.ok("driver version", ret) {
		sys.Driver = v
	}
	if v, ret := lib.SystemGetCudaDriverVersion(); r.ok("CUDA driver version", ret) {
		sys.CUDADriverVersion = fmt.Sprintf("%d.%d", v/1000, v%1000/10) // 12040 -> "12.4"
	}
	if v, ret := lib.SystemGetNVMLVersion(); r.ok("NVML version", ret) {
		sys.NVMLVersion = v
	}
	sys.Unavailable = r.missing
	if r.err != nil {
		return sys, r.err
	}
	count, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return sys, fmt.Errorf("counting GPUs through NVML: %v", ret)
	}
	if count == 0 {
		return sys, fmt.Errorf("%w (driver %s)", ErrNoDevice, sys.Driver)
	}
	for i := range count {
		dev, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			sys.Devices = append(sys.Devices, Device{Index: i, Lost: "NVML cannot open it: " + ret.Error()})
			continue
		}
		d, err := queryDevice(i, dev, sys.Features)
		if err != nil {
			d = Device{Index: i, UUID: d.UUID, Serial: d.Serial, PCIBusID: d.PCIBusID, Name: d.Name, Lost: err.Error()}
		}
		sys.Devices = append(sys.Devices, d)
	}
	return sys, nil
}

// Usable is the devices NVML could read, without the lost ones.
func (s System) Usable() []Device {
	var out []Device
	for _, d := range s.Devices {
		if d.Lost == "" {
			out = append(out, d)
		}
	}
	return out
}

func initError(ret nvml.Return, whyMissing func() string) error {
	switch ret {
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		why := "NVML init: " + ret.Error()
		if whyMissing != nil {
			if w := whyMissing(); w != "" {
				why = w
			}
		}
		return fmt.Errorf("%w (%s could not be loaded): %s", ErrNoDriver, libraryName, why)
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return fmt.Errorf("%w (%s is installed but the NVIDIA kernel driver is not loaded)", ErrNoDriver, libraryName)
	}
	return fmt.Errorf("NVML init failed: %v", ret)
}

// queryDevice reads one device. Name, UUID and memory size are required; the rest is optional.
// The PCI bus id and the UUID are read first, so that a card failing later is still named.
func queryDevice(index int, dev nvml.Device, f Features) (Device, error) {
	d := Device{Index: index}
	r := reads{}
	if pci, ret := dev.GetPciInfo(); r.ok("PCI bus ID", ret) {
		d.PCIBusID = cString(pci.BusId[:])
	}
	uuid, uuidRet := dev.GetUUID()
	if uuidRet == nvml.SUCCESS {
		d.UUID = uuid
	}
	var ret nvml.Return
	if d.Name, ret = dev.GetName(); ret != nvml.SUCCESS {
		return d, fmt.Errorf("name: %v", ret)
	}
	if uuidRet != nvml.SUCCESS {
		return d, fmt.Errorf("%s: UUID: %v", d.Name, uuidRet)
	}
	mem, ret := dev.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return d, fmt.Errorf("%s: memory size: %v", d.Name, ret)
	}
	d.MemoryTotalBytes = mem.Total

	if v, ret := dev.GetSerial(); r.ok("serial", ret) {
		d.Serial = v
	}
	if v, ret := dev.GetClockInfo(nvml.CLOCK_MEM); r.ok("memory clock", ret) {
		d.MemClockMHz = v
	}
	if v, ret := dev.GetMaxClockInfo(nvml.CLOCK_MEM); r.ok("max memory clock", ret) {
		d.MaxMemClockMHz = v
	}
	if v, ret := dev.GetClockInfo(nvml.CLOCK_SM); r.ok("SM clock", ret) {
		d.SMClockMHz = v
	}
	if v, ret := dev.GetMaxClockInfo(nvml.CLOCK_SM); r.ok("max SM clock", ret) {
		d.MaxSMClockMHz = v
	}
	if !f.MemoryBusWidth {
		r.ok("memory bus width", nvml.ERROR_FUNCTION_NOT_FOUND)
	} else if v, ret := dev.GetMemoryBusWidth(); r.ok("memory bus width", ret) {
		d.MemBusWidthBits = v
	}
	if d.MaxMemClockMHz > 0 && d.MemBusWidthBits > 0 {
		d.DatasheetBandwidthBytesPerSec = DDRBandwidthBytesPerSec(d.MaxMemClockMHz, d.MemBusWidthBits)
	}
	if v, ret := dev.GetCurrPcieLinkGeneration(); r.ok("PCIe generation", ret) {
		d.PCIeGen = v
	}
	if v, ret := dev.GetCurrPcieLinkWidth(); r.ok("PCIe width", ret) {
		d.PCIeWidth = v
	}
	if v, ret := dev.GetMaxPcieLinkGeneration(); r.ok("max PCIe generation", ret) {
		d.MaxPCIeGen = v
	}
	if v, ret := dev.GetMaxPcieLinkWidth(); r.ok("max PCIe width", ret) {
		d.MaxPCIeWidth = v
	}
	if current, _, ret := dev.GetEccMode(); r.ok("ECC mode", ret) {
		d.ECCEnabled = current == nvml.FEATURE_ENABLED
	}
	// The enforced limit is the one that holds (the lesser of the set and the board's); the
	// management limit is the fallback on drivers without it.
	if mw, ret := dev.GetEnforcedPowerLimit(); ret == nvml.SUCCESS {
		d.PowerLimitWatts = float64(mw) / 1000
	} else if mw, ret := dev.GetPowerManagementLimit(); r.ok("power limit", ret) {
		d.PowerLimitWatts = float64(mw) / 1000
	}
	if v, ret := readTemperature(dev, f); r.ok("temperature", ret) {
		d.TemperatureC = v
	}
	if major, minor, ret := dev.GetCudaComputeCapability(); r.ok("compute capability", ret) {
		d.ComputeCapability = fmt.Sprintf("%d.%d", major, minor)
	}
	d.Unavailable = r.missing
	if r.err != nil {
		return d, fmt.Errorf("%s: %w", d.Name, r.err)
	}
	return d, nil
}

// reads sorts NVML answers for optional fields: success, a gap to note, or a real failure.
type reads struct {
	missing []string
	err     error // the first real failure
}

// ok reports whether ret is SUCCESS. "Not supported", "no permission" and a missing entry
// point leave the field zero and are noted in missing; anything else (GPU lost, unknown) is
// kept as the first error.
func (r *reads) ok(field string, ret nvml.Return) bool {
	switch ret {
	case nvml.SUCCESS:
		return true
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_NO_PERMISSION, nvml.ERROR_FUNCTION_NOT_FOUND:
		r.missing = append(r.missing, field+": "+ret.Error())
	default:
		if r.err == nil {
			r.err = fmt.Errorf("%s: %v", field, ret)
		}
	}
	return false
}

// cString turns NVML's NUL-terminated char array into a string.
func cString(chars []int8) string {
	b := make([]byte, 0, len(chars))
	for _, c := range chars {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b)
}
