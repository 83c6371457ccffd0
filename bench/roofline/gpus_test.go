package roofline

import (
	"strings"
	"testing"
)

const mib = 1 << 20

func TestTableRowsAreComplete(t *testing.T) {
	seenKey := map[string]string{}
	seenSpelling := map[string]string{}
	for _, g := range GPUs() {
		if g.Key == "" || g.Name == "" || g.Source == "" {
			t.Errorf("%+v: key, name and source are required", g)
		}
		if _, dup := seenKey[g.Key]; dup {
			t.Errorf("duplicate key %q", g.Key)
		}
		seenKey[g.Key] = g.Key
		if g.MemoryBytes <= 0 || g.BandwidthBytesPerSec <= 0 || g.TensorBF16FLOPs <= 0 ||
			g.FP32FLOPs <= 0 || g.L2Bytes <= 0 || g.SMs <= 0 {
			t.Errorf("%s: every number must be positive: %+v", g.Key, g)
		}
		// Dense tensor rates sit well above plain fp32 and below 2.5 PFLOP/s on these cards; a
		// value outside that is a unit slip (TFLOPS written as FLOPS, or the sparse figure).
		if g.TensorBF16FLOPs < g.FP32FLOPs || g.TensorBF16FLOPs > 2.5e15 {
			t.Errorf("%s: bf16 %g FLOP/s looks wrong", g.Key, g.TensorBF16FLOPs)
		}
		if g.BandwidthBytesPerSec < 100e9 || g.BandwidthBytesPerSec > 10e12 {
			t.Errorf("%s: bandwidth %g B/s looks wrong", g.Key, g.BandwidthBytesPerSec)
		}
		// LookupGPU must never be ambiguous.
		for _, s := range g.spellings() {
			if other, dup := seenSpelling[squash(s)]; dup && other != g.Key {
				t.Errorf("spelling %q of %s is also a spelling of %s", s, g.Key, other)
			}
			seenSpelling[squash(s)] = g.Key
		}
	}
	for _, key := range []string{"h100-sxm", "h100-pcie", "h200", "h20", "a100-40gb", "a100-80gb", "a10", "l4", "l40s", "rtx-4090", "b200"} {
		if _, ok := seenKey[key]; !ok {
			t.Errorf("row %s is missing", key)
		}
	}
}

func TestH200Row(t *testing.T) {
	g, err := LookupGPU("h200")
	if err != nil {
		t.Fatal(err)
	}
	if g.BandwidthBytesPerSec != 4.8e12 || g.MemoryBytes != 141*gib || g.SMs != 132 {
		t.Errorf("h200 row: %+v", g)
	}
	if tf := g.TensorBF16FLOPs / 1e12; tf < 989 || tf > 990 {
		t.Errorf("h200 dense bf16 = %g TFLOP/s, want 989", tf)
	}
}

func TestGPUsReturnsACopy(t *testing.T) {
	a := GPUs()
	a[0].Aliases[0] = "changed"
	a[0].Key = "changed"
	if b := GPUs(); b[0].Key == "changed" || b[0].Aliases[0] == "changed" {
		t.Error("GPUs exposes the table")
	}
}

func TestLookupGPU(t *testing.T) {
	tests := []struct {
		desc, name, want string
	}{
		{"key", "h200", "h200"},
		{"upper case", "H200", "h200"},
		{"underscore", "H100_SXM", "h100-sxm"},
		{"spaces", "h100 sxm", "h100-sxm"},
		{"no separator", "rtx4090", "rtx-4090"},
		{"alias", "A100-SXM4-40GB", "a100-40gb"},
		{"80GB key", "a100-80gb", "a100-80gb"},
		{"full name", "NVIDIA L40S", "l40s"},
		{"NVML name through MatchNVML", "NVIDIA H100 80GB HBM3", "h100-sxm"},
		{"NVML name with size", "NVIDIA A100-PCIE-80GB", "a100-80gb-pcie"},
	}
	for _, tc := range tests {
		g, err := LookupGPU(tc.name)
		if err != nil || g.Key != tc.want {
			t.Errorf("%s: LookupGPU(%q) = %q, %v; want %q", tc.desc, tc.name, g.Key, err, tc.want)
		}
	}
}

func TestLookupGPUUnknown(t *testing.T) {
	tests := []struct {
		desc, name  string
		wantClosest string
	}{
		{"typo", "h2000", "h200"},
		{"prefix of a key", "l40", "l40s"},
		{"ambiguous without memory size", "a100", "a100-40gb"},
		{"empty", "", ""},
		{"punctuation only", "--", ""},
	}
	for _, tc := range tests {
		_, err := LookupGPU(tc.name)
		if err == nil {
			t.Errorf("%s: LookupGPU(%q) found a row", tc.desc, tc.name)
			continue
		}
		msg := err.Error()
		for _, key := range Keys() {
			if !strings.Contains(msg, key) {
				t.Errorf("%s: error %q does not list %s", tc.desc, msg, key)
			}
		}
		if tc.wantClosest != "" && !strings.Contains(msg, "closest "+tc.wantClosest) {
			t.Errorf("%s: error %q should name %s first among the closest", tc.desc, msg, tc.wantClosest)
		}
	}
}

func TestMatchNVML(t *testing.T) {
	tests := []struct {
		desc      string
		name      string
		memoryMiB uint64
		want      string // "" = no match
	}{
		// Names and totals as NVML reports them.
		{"H100 SXM", "NVIDIA H100 80GB HBM3", 81559, "h100-sxm"},
		{"H100 PCIe", "NVIDIA H100 PCIe", 81559, "h100-pcie"},
		{"H100 NVL", "NVIDIA H100 NVL", 95830, "h100-nvl"},
		{"H200 SXM", "NVIDIA H200", 143771, "h200"},
		{"H200 NVL", "NVIDIA H200 NVL", 143771, "h200-nvl"},
		{"H20 is not H200", "NVIDIA H20", 97871, "h20"},
		{"H20 141GB variant has other numbers", "NVIDIA H20", 143771, ""},
		{"A100 SXM 40GB", "NVIDIA A100-SXM4-40GB", 40960, "a100-40gb"},
		{"A100 PCIe 40GB", "NVIDIA A100-PCIE-40GB", 40960, "a100-40gb"},
		{"A100 SXM 80GB", "NVIDIA A100-SXM4-80GB", 81920, "a100-80gb"},
		{"A100 PCIe 80GB", "NVIDIA A100 80GB PCIe", 81920, "a100-80gb-pcie"},
		{"A10", "NVIDIA A10", 23028, "a10"},
		{"A10G is not A10", "NVIDIA A10G", 23028, ""},
		{"L4", "NVIDIA L4", 23034, "l4"},
		{"L40 is not L40S", "NVIDIA L40", 46068, ""},
		{"L40S", "NVIDIA L40S", 46068, "l40s"},
		{"RTX 4090", "NVIDIA GeForce RTX 4090", 24564, "rtx-4090"},
		{"RTX 4090 D has fewer SMs", "NVIDIA GeForce RTX 4090 D", 24564, ""},
		{"B200", "NVIDIA B200", 183359, "b200"},
		// go-nvml's mock servers.
		{"mock H200", "NVIDIA H200 141GB HBM3e", 144384, "h200"},
		{"mock H100", "NVIDIA H100 80GB HBM3", 81920, "h100-sxm"},
		{"mock B200", "NVIDIA B200 180GB HBM3e", 184320, "b200"},
		// Memory unknown: the name alone.
		{"no memory", "NVIDIA H200", 0, "h200"},
		{"no memory, size in name", "NVIDIA A100-PCIE-40GB", 0, "a100-40gb"},
		{"no memory, ambiguous", "NVIDIA A100-PCIE", 0, ""},
		// Memory that fits no row of that name.
		{"wrong memory", "NVIDIA H100 80GB HBM3", 40960, ""},
		{"size word disagrees", "NVIDIA A100-SXM4-40GB", 81920, ""},
		{"empty", "", 81920, ""},
		{"unknown", "NVIDIA Tesla T4", 15360, ""},
	}
	for _, tc := range tests {
		g, ok := MatchNVML(tc.name, tc.memoryMiB*mib)
		if tc.want == "" {
			if ok {
				t.Errorf("%s: MatchNVML(%q, %d MiB) = %s, want no match", tc.desc, tc.name, tc.memoryMiB, g.Key)
			}
			continue
		}
		if !ok || g.Key != tc.want {
			t.Errorf("%s: MatchNVML(%q, %d MiB) = %q, %v; want %s", tc.desc, tc.name, tc.memoryMiB, g.Key, ok, tc.want)
		}
	}
}
