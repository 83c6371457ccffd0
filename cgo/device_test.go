package cgo_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

// libraries are the kernels libraries the device tests run on: the fake one (always) and
// the real emulator (when built; see cgotest).
var libraries = []struct {
	name string
	open func(t *testing.T) *cgo.Library
}{
	{"fake", func(t *testing.T) *cgo.Library {
		lib, err := cgo.OpenPath(buildFake(t, fakeEmu))
		if err != nil {
			t.Fatal(err)
		}
		return lib
	}},
	{"emu", func(t *testing.T) *cgo.Library { return cgotest.Emu(t) }},
	{"cuda", func(t *testing.T) *cgo.Library { return cgotest.CUDA(t) }},
}

// forEachLibrary runs test on device 0 of each library.
func forEachLibrary(t *testing.T, test func(t *testing.T, lib *cgo.Library, dev *cgo.Device)) {
	for _, l := range libraries {
		t.Run(l.name, func(t *testing.T) {
			lib := l.open(t)
			dev, err := lib.OpenDevice(0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := dev.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			test(t, lib, dev)
		})
	}
}

func mustAlloc(t *testing.T, dev *cgo.Device, bytes uint64) *cgo.Buffer {
	t.Helper()
	b, err := dev.Alloc(bytes)
	if err != nil {
		t.Fatalf("Alloc(%d): %v", bytes, err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestDeviceCountAndProps(t *testing.T) {
	forEachLibrary(t, func(t *testing.T, lib *cgo.Library, dev *cgo.Device) {
		n, err := lib.DeviceCount()
		if err != nil || n < 1 {
			t.Fatalf("DeviceCount = %d, %v", n, err)
		}
		props, err := dev.Props()
		if err != nil {
			t.Fatal(err)
		}
		if props.Name == "" || props.SMCount < 1 || props.MaxThreadsPerBlock < 1 || props.MemTotalBytes == 0 {
			t.Errorf("props look empty: %+v", props)
		}
		if _, err := lib.DeviceProps(n); !errors.Is(err, cgo.ErrNoDevice) {
			t.Errorf("DeviceProps(%d) = %v, want ErrNoDevice", n, err)
		}
		if _, err := lib.OpenDevice(n); !errors.Is(err, cgo.ErrNoDevice) {
			t.Errorf("OpenDevice(%d) = %v, want ErrNoDevice", n, err)
		}
		if _, err := lib.OpenDevice(1 << 40); !errors.Is(err, cgo.ErrInvalidArgument) {
			t.Errorf("OpenDevice(2^40) = %v, want ErrInvalidArgument", err)
		}
	})
}

func TestFillHashMatchesReference(t *testing.T) {
	forEachLibrary(t, func(t *testing.T, lib *cgo.Library, dev *cgo.Device) {
		const n = 1000 // not a multiple of any vector width
		buf := mustAlloc(t, dev, 4*n)
		for _, c := range []struct {
			dtype cgo.DType
			seed  uint64
			scale float32
		}{
			{cgo.DTypeBF16, 1, 1}, {cgo.DTypeFP16, 2, 0.1}, {cgo.DTypeF32, 3, 3.7}, {cgo.DTypeU32, 4, 1},
			{cgo.DTypeFP16, 5, 1e6}, // overflows to infinity, as the reference says
		} {
			if err := buf.Memset(0xFF); err != nil {
				t.Fatal(err)
			}
			if err := buf.FillHash(c.dtype, n, c.seed, c.scale); err != nil {
				t.Fatalf("FillHash(%v): %v", c.dtype, err)
			}
			got := make([]byte, n*c.dtype.Bytes())
			if err := buf.CopyToHost(got); err != nil {
				t.Fatal(err)
			}
			want := ref.FillBytes(ref.DType(c.dtype), c.seed, c.scale, n)
			if !bytes.Equal(got, want) {
				t.Errorf("%v fill (seed %d, scale %v) differs from bench/ref: %s", c.dtype, c.seed, c.scale, firstDiff(got, want))
			}
			// The rest of the buffer is still poison: the fill wrote only n elements.
			rest := make([]byte, 4*n)
			if err := buf.CopyToHost(rest); err != nil {
				t.Fatal(err)
			}
			for i := len(want); i < len(rest); i++ {
				if rest[i] != 0xFF {
					t.Fatalf("%v fill of %d elements wrote byte %d", c.dtype, n, i)
				}
			}
		}
	})
}

func firstDiff(got, want []byte) string {
	for i := range got {
		if got[i] != want[i] {
			return fmt.Sprintf("first at byte %d: got %#02x, want %#02x", i, got[i], want[i])
		}
	}
	return "lengths differ"
}

func TestCopiesAndMemset(t *testing.T) {
	forEachLibrary(t, func(t *testing.T, lib *cgo.Library, dev *cgo.Device) {
		buf := mustAlloc(t, dev, 64)
		words := []uint32{1, 2, 3, 0xDEADBEEF}
		if err := cgo.Write(buf, words); err != nil {
			t.Fatal(err)
		}
		back := make([]uint32, 4)
		if err := cgo.Read(buf, back); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(back) != fmt.Sprint(words) {
			t.Errorf("round trip: %v, want %v", back, words)
		}
		if err := buf.Memset(0xFF); err != nil {
			t.Fatal(err)
		}
		halves := make([]uint16, 32)
		floats := make([]float32, 16)
		if err := cgo.Read(buf, halves); err != nil {
			t.Fatal(err)
		}
		if err := cgo.Read(buf, floats); err != nil {
			t.Fatal(err)
		}
		for i := range halves {
			if !math.IsNaN(float64(ref.BF16ToFloat32(halves[i]))) || !math.IsNaN(float64(ref.FP16ToFloat32(halves[i]))) {
				t.Fatalf("0xFF poison is not NaN as bf16/fp16: %#04x", halves[i])
			}
		}
		for _, f := range floats {
			if !math.IsNaN(float64(f)) {
				t.Fatalf("0xFF poison is not NaN as f32: %v", f)
			}
		}
		// Empty copies are no-ops.
		if err := buf.CopyToHost(nil); err != nil {
			t.Errorf("empty copy: %v", err)
		}
	})
}

func TestBadArguments(t *testing.T) {
	forEachLibrary(t, func(t *testing.T, lib *cgo.Library, dev *cgo.Device) {
		buf := mustAlloc(t, dev, 16)
		cases := []struct {
			desc string
			err  error
			want error
		}{
			{"zero-byte alloc", func() error { _, err := dev.Alloc(0); return err }(), cgo.ErrInvalidArgument},
			{"copy past the end", buf.CopyToHost(make([]byte, 17)), cgo.ErrInvalidArgument},
			{"write past the end", cgo.Write(buf, make([]float32, 5)), cgo.ErrInvalidArgument},
			{"fill past the end", buf.FillHash(cgo.DTypeBF16, 9, 0, 1), cgo.ErrInvalidArgument},
			{"fill of an unknown dtype", buf.FillHash(cgo.DType(42), 1, 0, 1), cgo.ErrInvalidArgument},
			{"int overflow", dev.Linear(cgo.LinearParams{Batch: 1 << 40, N: 1, K: 8}), cgo.ErrInvalidArgument},
		}
		for _, c := range cases {
			if !errors.Is(c.err, c.want) {
				t.Errorf("%s: %v, want %v", c.desc, c.err, c.want)
			}
		}
	})
}

func TestLinear(t *testing.T) {
	forEachLibrary(t, func(t *testing.T, lib *cgo.Library, dev *cgo.Device) {
		const batch, n, k = 3, 17, 64
		x, w, y := mustAlloc(t, dev, 2*batch*k), mustAlloc(t, dev, 2*n*k), mustAlloc(t, dev, 2*batch*n)
		if err := x.FillHash(cgo.DTypeBF16, batch*k, 1, 1); err != nil {
			t.Fatal(err)
		}
		if err := w.FillHash(cgo.DTypeBF16, n*k, 2, 0.125); err != nil {
			t.Fatal(err)
		}
		if err := y.Memset(0xFF); err != nil {
			t.Fatal(err)
		}
		params := cgo.LinearParams{X: x.Ptr, W: w.Ptr, Y: y.Ptr, Batch: batch, N: n, K: k, DType: cgo.DTypeBF16}
		resolved, workspace, err := dev.LinearPlan(params)
		if err != nil {
			t.Fatalf("LinearPlan(%+v): %v", params, err)
		}
		if resolved.Variant == cgo.LinearAuto || resolved.SplitK < 1 || resolved.X != x.Ptr || resolved.N != n {
			t.Errorf("LinearPlan gave %+v", resolved)
		}
		if workspace > 0 {
			ws := mustAlloc(t, dev, workspace)
			resolved.Workspace, resolved.WorkspaceBytes = ws.Ptr, ws.Bytes
		}
		if err := dev.Linear(resolved); err != nil {
			t.Fatal(err)
		}
		raw := make([]uint16, batch*n)
		if err := cgo.Read(y, raw); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, len(raw))
		for i, h := range raw {
			got[i] = ref.BF16ToFloat32(h)
		}
		want := ref.Linear(ref.LinearInputs{DType: ref.BF16, Batch: batch, N: n, K: k, SeedX: 1, SeedW: 2, ScaleX: 1, ScaleW: 0.125})
		if c := ref.Compare(got, want.Want, want.ElementBounds(ref.BF16, k), ref.LinearTolerance(ref.BF16)); !c.Passed {
			t.Errorf("linear %s: %s", resolved.Variant, c.Reason())
		}

		bad := resolved
		bad.K = 1001
		_, _, err = dev.LinearPlan(bad)
		if !errors.Is(err, cgo.ErrUnsupportedShape) || !strings.Contains(err.Error(), "1001") || !strings.HasPrefix(err.Error(), "db_linear_plan: ") {
			t.Errorf("LinearPlan(k=1001) = %v, want ErrUnsupportedShape naming 1001", err)
		}
		var cerr *cgo.Error
		if !errors.As(err, &cerr) || cerr.Status != cgo.StatusUnsupportedShape || cerr.Detail == "" || cerr.Text == "" {
			t.Errorf("error %#v lacks a status, text or detail", err)
		}
	})
}

func TestProbePlanSizesTheResult(t *testing.T) {
	forEachLibrary(t, func(t *testing.T, lib *cgo.Library, dev *cgo.Device) {
		result := mustAlloc(t, dev, 4*64)
		plan, err := dev.ProbePlan(cgo.ProbeParams{Kind: cgo.ProbeFMAF32, Result: result.Ptr, Blocks: 2, Threads: 32, Iterations: 1})
		if err != nil {
			t.Fatal(err)
		}
		if plan.BlocksUsed != 2 || plan.ThreadsUsed != 32 {
			t.Errorf("ProbePlan = %+v, want 2 blocks of 32 threads", plan)
		}
		// Auto picks some launch; the plan says how big it is before anything runs.
		auto, err := dev.ProbePlan(cgo.ProbeParams{Kind: cgo.ProbeMMABF16, Result: result.Ptr, Iterations: 1})
		if err != nil || auto.BlocksUsed < 1 || auto.ThreadsUsed < 1 || auto.FLOPs <= 0 {
			t.Errorf("auto ProbePlan = %+v, %v", auto, err)
		}
	})
}

func TestTimer(t *testing.T) {
	forEachLibrary(t, func(t *testing.T, lib *cgo.Library, dev *cgo.Device) {
		tm, err := dev.NewTimer()
		if err != nil {
			t.Fatal(err)
		}
		buf := mustAlloc(t, dev, 1<<12)
		if err := tm.Start(); err != nil {
			t.Fatal(err)
		}
		if err := buf.FillHash(cgo.DTypeU32, 1<<10, 0, 1); err != nil {
			t.Fatal(err)
		}
		if err := tm.Stop(); err != nil {
			t.Fatal(err)
		}
		ms, err := tm.ElapsedMs()
		if err != nil || ms < 0 || math.IsNaN(float64(ms)) {
			t.Errorf("ElapsedMs = %v, %v", ms, err)
		}
		if err := tm.Close(); err != nil {
			t.Fatal(err)
		}
		if err := tm.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if err := tm.Start(); !errors.Is(err, cgo.ErrClosed) {
			t.Errorf("Start after Close = %v, want ErrClosed", err)
		}
	})
}

func TestCloseAndReuse(t *testing.T) {
	forEachLibrary(t, func(t *testing.T, lib *cgo.Library, _ *cgo.Device) {
		dev, err := lib.OpenDevice(0)
		if err != nil {
			t.Fatal(err)
		}
		kept, err := dev.Alloc(256) // left open: the device's Close frees it
		if err != nil {
			t.Fatal(err)
		}
		closed, err := dev.Alloc(256)
		if err != nil {
			t.Fatal(err)
		}
		if err := closed.Close(); err != nil {
			t.Fatal(err)
		}
		if err := closed.Close(); err != nil {
			t.Errorf("second Buffer.Close: %v", err)
		}
		if err := closed.Memset(0); !errors.Is(err, cgo.ErrClosed) {
			t.Errorf("Memset after Close = %v, want ErrClosed", err)
		}
		if _, err := dev.NewTimer(); err != nil { // left open too
			t.Fatal(err)
		}
		if err := dev.Close(); err != nil {
			t.Fatalf("Device.Close with a live buffer and timer: %v", err)
		}
		if err := dev.Close(); err != nil {
			t.Errorf("second Device.Close: %v", err)
		}
		if err := kept.Close(); err != nil {
			t.Errorf("Buffer.Close after its device's Close: %v", err)
		}
		if _, err := dev.Alloc(16); !errors.Is(err, cgo.ErrClosed) {
			t.Errorf("Alloc after Close = %v, want ErrClosed", err)
		}
		if err := dev.Do(func() error { return nil }); !errors.Is(err, cgo.ErrClosed) {
			t.Errorf("Do after Close = %v, want ErrClosed", err)
		}
		// A new context on the same device works.
		again, err := lib.OpenDevice(0)
		if err != nil {
			t.Fatal(err)
		}
		if err := again.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestDoRunsNestedCallsInline(t *testing.T) {
	forEachLibrary(t, func(t *testing.T, lib *cgo.Library, dev *cgo.Device) {
		var buf *cgo.Buffer
		err := dev.Do(func() error {
			var err error
			if buf, err = dev.Alloc(64); err != nil { // would deadlock if not inline
				return err
			}
			return buf.FillHash(cgo.DTypeU32, 16, 9, 1)
		})
		if err != nil {
			t.Fatal(err)
		}
		defer buf.Close()
		sentinel := errors.New("from inside Do")
		if err := dev.Do(func() error { return sentinel }); err != sentinel {
			t.Errorf("Do returned %v, want the function's error", err)
		}
		if err := dev.Do(func() error { return dev.Close() }); err == nil {
			t.Error("Close from inside Do succeeded")
		}
		func() {
			defer func() {
				if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), "boom") {
					t.Errorf("panic in Do came back as %v", p)
				}
			}()
			dev.Do(func() error { panic("boom") })
		}()
		// The device still works after a panic.
		if err := dev.Synchronize(); err != nil {
			t.Errorf("Synchronize after a panic: %v", err)
		}
	})
}

func TestConcurrentCallers(t *testing.T) {
	forEachLibrary(t, func(t *testing.T, lib *cgo.Library, dev *cgo.Device) {
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf, err := dev.Alloc(4 * 64)
				if err != nil {
					errs <- err
					return
				}
				defer buf.Close()
				if err := buf.FillHash(cgo.DTypeU32, 64, uint64(g), 1); err != nil {
					errs <- err
					return
				}
				got := make([]uint32, 64)
				if err := cgo.Read(buf, got); err != nil {
					errs <- err
					return
				}
				if want := ref.FillWords(uint64(g), 64); fmt.Sprint(got) != fmt.Sprint(want) {
					errs <- fmt.Errorf("goroutine %d read another's data", g)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

func TestDTypeValuesMatchRef(t *testing.T) {
	pairs := map[cgo.DType]ref.DType{cgo.DTypeF32: ref.F32, cgo.DTypeBF16: ref.BF16, cgo.DTypeFP16: ref.FP16, cgo.DTypeU32: ref.U32}
	for c, r := range pairs {
		if int32(c) != int32(r) || c.String() != r.String() || int(c.Bytes()) != r.Bytes() {
			t.Errorf("cgo %v (%d) and ref %v (%d) disagree", c, c, r, r)
		}
	}
}

func TestNames(t *testing.T) {
	for _, v := range []cgo.LinearVariant{cgo.LinearAuto, cgo.LinearGEMV, cgo.LinearMMA, cgo.LinearTiled, cgo.LinearCUBLAS} {
		if got, err := cgo.ParseLinearVariant(v.String()); err != nil || got != v {
			t.Errorf("ParseLinearVariant(%q) = %v, %v", v.String(), got, err)
		}
	}
	if _, err := cgo.ParseLinearVariant("wmma"); err == nil {
		t.Error("ParseLinearVariant(wmma) succeeded")
	}
	for _, k := range cgo.ProbeKinds {
		if got, err := cgo.ParseProbeKind(k.String()); err != nil || got != k {
			t.Errorf("ParseProbeKind(%q) = %v, %v", k.String(), got, err)
		}
	}
	if _, err := cgo.ParseProbeKind("stream"); err == nil {
		t.Error("ParseProbeKind(stream) succeeded")
	}
	if cgo.StatusUnsupportedShape.Error() != "unsupported shape" || !strings.Contains(cgo.Status(77).Error(), "77") {
		t.Error("status names")
	}
}
