package timing

import (
	"errors"
	"math"
	"testing"
	"time"
)

// fakeClock advances by step on every reading.
func fakeClock(step time.Duration) Clock {
	t := time.Unix(0, 0)
	return func() time.Time { t = t.Add(step); return t }
}

func TestMeasureStopsWhenSpreadIsSmall(t *testing.T) {
	calls := 0
	st, err := MeasureWithClock(Default, fakeClock(10*time.Millisecond), func() (float64, error) {
		calls++
		return 1e-3, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !st.Converged || st.Median != 1e-3 || st.Spread != 0 {
		t.Fatalf("got %+v", st)
	}
	// 0.5 s of wall time at 10 ms a reading: about 50 samples, never fewer than 10.
	if len(st.Samples) < 10 || st.WallSeconds < 0.5 {
		t.Fatalf("stopped too early: %d samples, %.3f s", len(st.Samples), st.WallSeconds)
	}
	if calls != len(st.Samples)+Default.Warmup {
		t.Fatalf("calls %d, samples %d, warm-up %d", calls, len(st.Samples), Default.Warmup)
	}
}

func TestMeasureTimesOutOnNoisySamples(t *testing.T) {
	i := 0
	st, err := MeasureWithClock(Default, fakeClock(100*time.Millisecond), func() (float64, error) {
		i++
		return 1e-3 * float64(1+i%2), nil // alternating 1 ms and 2 ms: spread never small
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Converged {
		t.Fatalf("noisy samples reported as converged: %+v", st)
	}
	if st.WallSeconds < Default.MaxSeconds {
		t.Fatalf("stopped at %.2f s before the %.0f s timeout", st.WallSeconds, Default.MaxSeconds)
	}
}

func TestMeasureRejectsBadSamples(t *testing.T) {
	for _, bad := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		_, err := MeasureWithClock(Default, fakeClock(time.Millisecond), func() (float64, error) { return bad, nil })
		if err == nil {
			t.Fatalf("sample %g accepted", bad)
		}
	}
	boom := errors.New("launch failed")
	_, err := MeasureWithClock(Default, fakeClock(time.Millisecond), func() (float64, error) { return 0, boom })
	if !errors.Is(err, boom) {
		t.Fatalf("sampler error lost: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		desc string
		cfg  Config
	}{
		{"no samples", Config{MinSamples: 0, TargetSpread: 0.01, MaxSeconds: 1}},
		{"zero spread", Config{MinSamples: 1, TargetSpread: 0, MaxSeconds: 1}},
		{"timeout under minimum", Config{MinSamples: 1, MinSeconds: 2, TargetSpread: 0.01, MaxSeconds: 1}},
		{"negative warm-up", Config{Warmup: -1, MinSamples: 1, TargetSpread: 0.01, MaxSeconds: 1}},
	}
	for _, c := range cases {
		if c.cfg.Validate() == nil {
			t.Errorf("%s: accepted %+v", c.desc, c.cfg)
		}
	}
	if err := Default.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestSummarize(t *testing.T) {
	st := Summarize([]float64{5, 1, 4, 2, 3})
	if st.Min != 1 || st.Max != 5 || st.Median != 3 || st.Q1 != 2 || st.Q3 != 4 {
		t.Fatalf("got %+v", st)
	}
	if math.Abs(st.Spread-2.0/3) > 1e-12 {
		t.Fatalf("spread %g", st.Spread)
	}
	if st.Samples[0] != 5 {
		t.Fatal("samples were reordered; they must stay in measurement order")
	}
}

func TestMedian(t *testing.T) {
	xs := []float64{3, 1, 2, 10}
	if m := Median(xs); m != 2.5 {
		t.Errorf("Median(%v) = %g, want 2.5", xs, m)
	}
	if xs[0] != 3 {
		t.Errorf("Median sorted its argument: %v", xs)
	}
	if m := Median([]float64{4, 1, 7}); m != 4 {
		t.Errorf("Median odd = %g, want 4", m)
	}
	if m := Median(nil); m != 0 {
		t.Errorf("Median(nil) = %g, want 0", m)
	}
}
