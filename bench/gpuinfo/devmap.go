package gpuinfo

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// CUDADeviceOrder is the CUDA_DEVICE_ORDER decodebench runs the CUDA backend under: with it,
// CUDA numbers devices by PCI bus id instead of fastest first, and its numbers can be matched
// to NVML's devices. It must be in the environment before the CUDA library initializes.
const CUDADeviceOrder = "PCI_BUS_ID"

// ErrMIG means CUDA_VISIBLE_DEVICES names a MIG instance, which decodebench does not measure.
var ErrMIG = errors.New("decodebench measures whole GPUs, not MIG instances")

// CUDAEnv is what the CUDA runtime numbers devices by.
type CUDAEnv struct {
	Visible    string // CUDA_VISIBLE_DEVICES
	VisibleSet bool   // the variable exists (an empty one hides every device)
	Order      string // CUDA_DEVICE_ORDER
}

// CUDAEnvironment reads CUDAEnv from the process environment.
func CUDAEnvironment() CUDAEnv {
	visible, set := os.LookupEnv("CUDA_VISIBLE_DEVICES")
	return CUDAEnv{Visible: visible, VisibleSet: set, Order: os.Getenv("CUDA_DEVICE_ORDER")}
}

// DeviceMap says which NVML device each CUDA device is.
type DeviceMap struct {
	devs  []Device
	cuda  []int // CUDA ordinal -> position in devs
	named []int // what CUDA_VISIBLE_DEVICES names (every card when unset), lost ones included
}

// MapCUDADevices matches the CUDA runtime's devices to NVML's (System.Devices, lost cards
// included). CUDA numbers the devices it sees by PCI bus id (under CUDADeviceOrder), keeping
// those CUDA_VISIBLE_DEVICES names, in its order: indices into the bus order, or UUIDs
// ("GPU-" and the hex digits, a unique prefix of them, with or without "GPU-"). As CUDA does,
// an entry that names no GPU ends the list. MIG instances are refused: decodebench measures
// whole GPUs. cudaCount is how many devices the runtime reports, or -1 when it was not asked
// (info): the map must account for every one of them.
//
// Under another CUDA_DEVICE_ORDER (FASTEST_FIRST, CUDA's default) the numbering is only known
// when every visible card is the same kind, which then come in bus order.
func MapCUDADevices(devs []Device, env CUDAEnv, cudaCount int) (DeviceMap, error) {
	order := busOrder(devs)
	var visible []int // positions in devs, in CUDA's order
	if !env.VisibleSet {
		visible = order
	} else {
		seen := map[int]bool{}
	entries:
		for _, entry := range strings.Split(env.Visible, ",") {
			entry = strings.TrimSpace(entry)
			match := -1
			if n, err := strconv.Atoi(entry); err == nil {
				if n < 0 || n >= len(order) {
					break entries // CUDA ignores an invalid entry and everything after it
				}
				match = order[n]
			} else if strings.HasPrefix(strings.ToUpper(entry), "MIG-") {
				return DeviceMap{}, fmt.Errorf("CUDA_VISIBLE_DEVICES names a MIG instance (%s): %w; name the GPU (its index or GPU- UUID, see `decodebench info`) or run on a GPU without MIG", entry, ErrMIG)
			} else {
				hex := strings.ToLower(strings.TrimPrefix(strings.ToUpper(entry), "GPU-"))
				if hex == "" {
					break entries
				}
				for i, d := range devs {
					if d.UUID != "" && strings.HasPrefix(strings.ToLower(strings.TrimPrefix(strings.ToUpper(d.UUID), "GPU-")), hex) {
						if match >= 0 {
							return DeviceMap{}, fmt.Errorf("CUDA_VISIBLE_DEVICES entry %q matches more than one GPU's UUID (%s and %s)", entry, devs[match].UUID, d.UUID)
						}
						match = i
					}
				}
				if match < 0 {
					break entries
				}
			}
			if seen[match] {
				return DeviceMap{}, fmt.Errorf("CUDA_VISIBLE_DEVICES=%q names GPU %d (%s) twice", env.Visible, devs[match].Index, devs[match].PCIBusID)
			}
			seen[match] = true
			visible = append(visible, match)
		}
	}
	if env.Order != CUDADeviceOrder {
		for _, i := range visible {
			if devs[i].Name != devs[visible[0]].Name {
				return DeviceMap{}, fmt.Errorf("CUDA_DEVICE_ORDER=%q numbers these different GPUs (%s, %s) fastest first, in an order NVML cannot tell; set CUDA_DEVICE_ORDER=%s",
					env.Order, devs[visible[0]].Name, devs[i].Name, CUDADeviceOrder)
			}
		}
	}
	// A card that fell off the bus may or may not still be counted by CUDA.
	if cudaCount >= 0 && len(visible) != cudaCount {
		alive := slices.DeleteFunc(slices.Clone(visible), func(i int) bool { return devs[i].Lost != "" })
		if len(alive) != cudaCount {
			what := fmt.Sprintf("NVML sees %d GPU(s)", len(visible))
			if env.VisibleSet {
				what = fmt.Sprintf("CUDA_VISIBLE_DEVICES=%q names %d GPU(s) NVML knows", env.Visible, len(visible))
			}
			return DeviceMap{}, fmt.Errorf("%s but the CUDA runtime sees %d: cannot tell which is which (a device NVML cannot open, or MIG?)", what, cudaCount)
		}
		return DeviceMap{devs: devs, cuda: alive, named: visible}, nil
	}
	return DeviceMap{devs: devs, cuda: visible, named: visible}, nil
}

// busOrder is the positions of devs in PCI bus order: CUDA's order under CUDADeviceOrder. When
// a card's bus id is unknown (NVML could not open it) NVML's own order stands in, which is the
// bus order on Linux.
func busOrder(devs []Device) []int {
	order := make([]int, len(devs))
	for i := range order {
		order[i] = i
	}
	for _, d := range devs {
		if d.PCIBusID == "" {
			return order
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(busKey(devs[a].PCIBusID), busKey(devs[b].PCIBusID)) })
	return order
}

// busKey normalizes a PCI bus id for ordering: NVML writes "00000000:18:00.0", CUDA and lspci
// "0000:18:00.0", in either case.
func busKey(id string) string {
	id = strings.ToLower(strings.TrimSpace(id))
	domain, rest, ok := strings.Cut(id, ":")
	if !ok || strings.Count(rest, ":") != 1 {
		return id
	}
	domain = strings.TrimLeft(domain, "0")
	return strings.Repeat("0", max(0, 8-len(domain))) + domain + ":" + rest
}

// Visible is the cards CUDA_VISIBLE_DEVICES names (every card when it is unset), in CUDA's
// order, with the lost ones CUDA no longer counts.
func (m DeviceMap) Visible() []Device {
	out := make([]Device, len(m.named))
	for i, n := range m.named {
		out[i] = m.devs[n]
	}
	return out
}

// Count is how many CUDA devices the map holds.
func (m DeviceMap) Count() int { return len(m.cuda) }

// NVML returns the NVML device that CUDA device cuda is.
func (m DeviceMap) NVML(cuda int) (Device, bool) {
	if cuda < 0 || cuda >= len(m.cuda) {
		return Device{}, false
	}
	return m.devs[m.cuda[cuda]], true
}

// CUDA returns the CUDA ordinal of the NVML device with this index, false when CUDA cannot see
// it.
func (m DeviceMap) CUDA(nvmlIndex int) (int, bool) {
	for c, i := range m.cuda {
		if m.devs[i].Index == nvmlIndex {
			return c, true
		}
	}
	return -1, false
}

// CheckName confirms that CUDA device cuda, which the runtime calls name, is the NVML device
// the map says: a mismatch means the numbering is not what the map assumed, and nothing
// measured there could be trusted to be that card.
func (m DeviceMap) CheckName(cuda int, name string) error {
	d, ok := m.NVML(cuda)
	if !ok {
		return fmt.Errorf("CUDA device %d is not among the %d the map holds", cuda, len(m.cuda))
	}
	if d.Name != "" && name != d.Name {
		return fmt.Errorf("NVML calls GPU %d %q but CUDA device %d is %q: the device numbering does not match, so nothing measured there could be trusted to be this card", d.Index, d.Name, cuda, name)
	}
	return nil
}
