package step

import (
	"errors"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/timing"
	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

var _ TimedDevice = (*cgo.Device)(nil)

func TestMain(m *testing.M) {
	code := m.Run()
	cgotest.RemoveFakes()
	os.Exit(code)
}

// quick is one sample of the steps: the emulator is slow and its times are no speed.
var quick = timing.Config{Warmup: 0, MinSamples: 1, MinSeconds: 0, TargetSpread: 1, MaxSeconds: 60}

// trace runs c in mode on the emulator; a function the library lacks skips the test, naming it.
func trace(t *testing.T, dev *cgo.Device, c Config, mode Mode) Trace {
	t.Helper()
	tr, _, err := RunTrace(dev, c, mode)
	switch {
	case errors.Is(err, cgo.ErrNotExported), errors.Is(err, cgo.ErrUnsupportedShape) && strings.Contains(err.Error(), "not built"):
		t.Skipf("%s mode: %v (the lead re-runs this once it is built)", mode, err)
	case err != nil:
		t.Fatal(err)
	}
	return tr
}

// checkTrace: every step fed the previous step's tokens, every logit finite, every token the
// argmax of its row (lowest index on a tie) and inside the vocabulary.
func checkTrace(t *testing.T, c Config, d cgo.DType, tr Trace) {
	t.Helper()
	ids, _ := (&Program{Config: c}).InitialState()
	if len(tr.Tokens) != c.Steps {
		t.Fatalf("%d steps traced, want %d", len(tr.Tokens), c.Steps)
	}
	if !slices.Equal(tr.Tokens[0], ids) {
		t.Errorf("step 0 fed %v, want the initial tokens %v", tr.Tokens[0], ids)
	}
	for b := 0; b < c.Batch; b++ {
		if pos, n := tr.PosLens[b], tr.PosLens[c.Batch+b]; int(pos) != c.Context+c.Steps || int(n) != c.Context+c.Steps+1 {
			t.Errorf("after %d steps sequence %d is at position %d with length %d, want %d and %d", c.Steps, b, pos, n, c.Context+c.Steps, c.Context+c.Steps+1)
		}
	}
	V := c.Model.Vocab
	for i := range tr.Tokens {
		if i > 0 && !slices.Equal(tr.Tokens[i], tr.Next[i-1]) {
			t.Errorf("step %d fed %v, step %d chose %v", i, tr.Tokens[i], i-1, tr.Next[i-1])
		}
		logits := LogitsOf(d, tr.Logits[i])
		for b := 0; b < c.Batch; b++ {
			row := logits[b*V : (b+1)*V]
			best := 0
			for j, x := range row {
				if math.IsNaN(x) || math.IsInf(x, 0) {
					t.Fatalf("step %d sequence %d: logit %d is %g", i, b, j, x)
				}
				if x > row[best] {
					best = j
				}
			}
			if got := tr.Next[i][b]; int(got) != best {
				t.Errorf("step %d sequence %d: the argmax wrote %d, the row's largest logit is %d", i, b, got, best)
			}
		}
	}
}

// TestTinyModelsEager runs each tiny family a few steps eagerly at two batches and checks the
// loop's bookkeeping; graph mode, where the library has it, must give the same bits.
func TestTinyModelsEager(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	for _, s := range Tiny() {
		for _, batch := range []int{1, 3} {
			c := Config{Model: s, Batch: batch, Context: 37, Steps: 3, Seed: 7}
			name := s.Name + map[int]string{1: "/b1", 3: "/b3"}[batch]
			var eager Trace
			t.Run(name+"/eager", func(t *testing.T) {
				eager = trace(t, dev, c, Eager)
				checkTrace(t, c, dtypeOf(s), eager)
			})
			t.Run(name+"/graph", func(t *testing.T) {
				if !dev.Library().HasFunction("db_graph_begin") {
					t.Skipf("db_graph_begin: %v (the lead re-runs this once it is built)", cgo.ErrNotExported)
				}
				graph := trace(t, dev, c, Graph)
				if !slices.EqualFunc(graph.Logits, eager.Logits, slices.Equal) || !slices.EqualFunc(graph.Next, eager.Next, slices.Equal) {
					t.Errorf("graph and eager differ: tokens %v vs %v", graph.Next, eager.Next)
				}
			})
		}
	}
}

// TestMeasureEager times a tiny step and checks what the result says.
func TestMeasureEager(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	c := Config{Model: Tiny()[0], Batch: 2, Context: 20, Steps: 2, Seed: 3}
	r := Measure(dev, true, c, []Mode{Eager}, Options{Timing: quick})
	if r.Status != measure.StatusOK || len(r.Modes) != 1 || !r.Modes[0].OK() {
		t.Fatalf("status %s (%s), modes %+v", r.Status, r.Reason, r.Modes)
	}
	if r.Launches < 10 || r.DeviceBytes == 0 {
		t.Errorf("launches %d, device bytes %d", r.Launches, r.DeviceBytes)
	}
}

// TestTinyMoEAndSliding: a mixture of experts (top-2 of 4, through db_grouped_linear) and a
// sliding window shorter than the context run their steps; each skips, naming what the
// library lacks, until the grouped linear and the attention's window are built.
func TestTinyMoEAndSliding(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	for _, c := range []Config{
		{Model: TinyMoE(), Batch: 3, Context: 30, Steps: 3, Seed: 11},
		{Model: TinySliding(), Batch: 2, Context: 40, Steps: 3, Seed: 12}, // window 16 < 40
	} {
		t.Run(c.Model.Name, func(t *testing.T) {
			if c.Model.IsMoE() && !dev.Library().HasFunction("db_grouped_linear") {
				t.Skipf("db_grouped_linear: %v (the lead re-runs this once it is built)", cgo.ErrNotExported)
			}
			eager := trace(t, dev, c, Eager)
			checkTrace(t, c, dtypeOf(c.Model), eager)
			if !dev.Library().HasFunction("db_graph_begin") {
				return
			}
			graph := trace(t, dev, c, Graph)
			if !slices.EqualFunc(graph.Logits, eager.Logits, slices.Equal) || !slices.EqualFunc(graph.Next, eager.Next, slices.Equal) {
				t.Errorf("graph and eager differ: tokens %v vs %v", graph.Next, eager.Next)
			}
		})
	}
}
