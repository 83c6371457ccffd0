package gpuinfo

import (
	"slices"
	"strings"
	"testing"
)

// fourGPUs are four cards whose NVML order is not their bus order (NVML does not promise it):
// CUDA, under CUDA_DEVICE_ORDER=PCI_BUS_ID, numbers them 18, 2a, 3b, 9a.
func fourGPUs() []Device {
	var d []Device
	for i, c := range []struct{ uuid, bus string }{
		{"GPU-aaaa1111", "00000000:3B:00.0"}, {"GPU-bbbb2222", "00000000:18:00.0"},
		{"GPU-cccc3333", "00000000:9A:00.0"}, {"GPU-aaaa4444", "00000000:2A:00.0"},
	} {
		d = append(d, Device{Index: i, UUID: c.uuid, PCIBusID: c.bus, Name: "NVIDIA H100 80GB HBM3"})
	}
	return d
}

func TestMapCUDADevices(t *testing.T) {
	pci := func(visible string, set bool) CUDAEnv {
		return CUDAEnv{Visible: visible, VisibleSet: set, Order: CUDADeviceOrder}
	}
	lost := fourGPUs()
	lost[2] = Device{Index: 2, PCIBusID: "00000000:9A:00.0", Lost: "GPU is lost"}
	mixed := fourGPUs()
	mixed[3].Name = "NVIDIA A100-SXM4-80GB"
	tests := []struct {
		desc  string
		devs  []Device
		env   CUDAEnv
		count int
		want  []int // NVML index of each CUDA device
		err   string
	}{
		{"unset: every card, in bus order", fourGPUs(), pci("", false), 4, []int{1, 3, 0, 2}, ""},
		{"unset, counts differ", fourGPUs(), pci("", false), 3, nil, "NVML sees 4 GPU(s) but the CUDA runtime sees 3"},
		{"Slurm's indices are bus positions", fourGPUs(), pci("3", true), 1, []int{2}, ""},
		{"indices in their order", fourGPUs(), pci("2,0", true), 2, []int{0, 1}, ""},
		{"full UUIDs, prefixes with and without GPU-", fourGPUs(), pci("GPU-cccc3333,bbbb,gpu-AAAA4", true), 3, []int{2, 1, 3}, ""},
		{"an invalid entry ends the list", fourGPUs(), pci("1,7,2", true), 1, []int{3}, ""},
		{"a UUID no card has ends the list", fourGPUs(), pci("0,GPU-ffff,1", true), 1, []int{1}, ""},
		{"set but empty: no device", fourGPUs(), pci("", true), 0, nil, ""},
		{"info does not ask CUDA", fourGPUs(), pci("0,1", true), -1, []int{1, 3}, ""},
		{"an ambiguous prefix", fourGPUs(), pci("aaaa", true), 1, nil, "more than one GPU"},
		{"MIG", fourGPUs(), pci("MIG-1234", true), 1, nil, "MIG instance"},
		{"MIG after a GPU", fourGPUs(), pci("0,MIG-GPU-aaaa1111/1/0", true), 2, nil, "decodebench measures whole GPUs"},
		{"twice", fourGPUs(), pci("1,GPU-aaaa4444", true), 2, nil, "twice"},
		{"a count CUDA disagrees with", fourGPUs(), pci("0,1", true), 1, nil, `CUDA_VISIBLE_DEVICES="0,1" names 2 GPU(s)`},
		{"a lost card CUDA does not count", lost, pci("", false), 3, []int{1, 3, 0}, ""},
		{"a lost card CUDA still counts", lost, pci("", false), 4, []int{1, 3, 0, 2}, ""},
		{"fastest first, one kind: bus order", fourGPUs(), CUDAEnv{}, 4, []int{1, 3, 0, 2}, ""},
		{"fastest first, two kinds", mixed, CUDAEnv{Order: "FASTEST_FIRST"}, 4, nil, "set CUDA_DEVICE_ORDER=PCI_BUS_ID"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			m, err := MapCUDADevices(tt.devs, tt.env, tt.count)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("err = %v, want %q", err, tt.err)
				}
				return
			}
			var got []int
			for c := range m.Count() {
				d, _ := m.NVML(c)
				got = append(got, d.Index)
				if back, ok := m.CUDA(d.Index); !ok || back != c {
					t.Errorf("CUDA(%d) = %d, %v; want %d", d.Index, back, ok, c)
				}
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("= %v, %v; want %v", got, err, tt.want)
			}
		})
	}
	m, _ := MapCUDADevices(fourGPUs(), CUDAEnv{Visible: "2", VisibleSet: true, Order: CUDADeviceOrder}, 1)
	if _, ok := m.CUDA(1); ok {
		t.Errorf("GPU 1 is hidden by CUDA_VISIBLE_DEVICES=2 but has a CUDA ordinal")
	}
	if err := m.CheckName(0, "NVIDIA H100 80GB HBM3"); err != nil {
		t.Error(err)
	}
	if err := m.CheckName(0, "fake device 0"); err == nil || !strings.Contains(err.Error(), `NVML calls GPU 0 "NVIDIA H100 80GB HBM3" but CUDA device 0 is "fake device 0"`) {
		t.Errorf("a name mismatch: %v", err)
	}
}

func TestBusKey(t *testing.T) {
	for in, want := range map[string]string{"00000000:18:00.0": "00000000:18:00.0", "0000:9A:00.0": "00000000:9a:00.0", "0001:18:00.0": "00000001:18:00.0"} {
		if got := busKey(in); got != want {
			t.Errorf("busKey(%q) = %q, want %q", in, got, want)
		}
	}
}
