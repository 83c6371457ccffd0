package plots

import (
	"fmt"
	"math"
	"strconv"

	"gonum.org/v1/plot"
)

// maxTickLabels keeps tick labels from running into each other on a panel half a figure wide.
const maxTickLabels = 9

// log2Ticks labels powers of two (batch 1, 2, 4 ... 256; context 1k, 4k, 32k). When there are
// more than maxTickLabels of them, every other (or third) one is a minor tick, so the labelled
// ones stay evenly spaced.
type log2Ticks struct{ format func(float64) string }

func (t log2Ticks) Ticks(min, max float64) []plot.Tick {
	if !(min > 0) || !(max >= min) || math.IsInf(max, 1) {
		return nil
	}
	lo := int(math.Ceil(math.Log2(min) - 1e-9))
	hi := int(math.Floor(math.Log2(max) + 1e-9))
	if hi < lo {
		return linearTicks{t.format}.Ticks(min, max)
	}
	step := 1
	for (hi-lo)/step+1 > maxTickLabels {
		step++
	}
	var ticks []plot.Tick
	for e := lo; e <= hi; e++ {
		v := math.Ldexp(1, e)
		tk := plot.Tick{Value: v}
		if (e-lo)%step == 0 {
			tk.Label = t.format(v)
		}
		ticks = append(ticks, tk)
	}
	return ticks
}

// log10Ticks labels 1, 10, 100 ... and, on a short range, 2 and 5 (or every digit) in between,
// choosing the coarsest set that gives at least three labels. The other digits are minor ticks.
type log10Ticks struct{ format func(float64) string }

var mantissaSets = [][]float64{{1}, {1, 2, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9}}

func (t log10Ticks) Ticks(min, max float64) []plot.Tick {
	if !(min > 0) || !(max >= min) || math.IsInf(max, 1) {
		return nil
	}
	lo := int(math.Floor(math.Log10(min)))
	hi := int(math.Ceil(math.Log10(max)))
	inRange := func(v float64) bool { return v >= min*(1-1e-9) && v <= max*(1+1e-9) }
	var labelled []float64
	decadeStep := 1
	for _, set := range mantissaSets {
		labelled = labelled[:0]
		for e := lo; e <= hi; e++ {
			for _, m := range set {
				if v := m * math.Pow10(e); inRange(v) {
					labelled = append(labelled, v)
				}
			}
		}
		if len(set) == 1 && len(labelled) > maxTickLabels {
			for len(labelled)/decadeStep > maxTickLabels {
				decadeStep++
			}
		}
		if len(labelled) >= 3 {
			break
		}
	}
	if len(labelled) < 2 {
		// Less than a factor of about 1.3 from end to end: a linear labelling reads better.
		return linearTicks{t.format}.Ticks(min, max)
	}
	isLabel := make(map[float64]bool, len(labelled))
	for _, v := range labelled {
		e := int(math.Floor(math.Log10(v) + 1e-9))
		if decadeStep == 1 || (e-lo)%decadeStep == 0 {
			isLabel[v] = true
		}
	}
	var ticks []plot.Tick
	minor := hi-lo <= 8
	for e := lo; e <= hi; e++ {
		for m := 1; m <= 9; m++ {
			v := float64(m) * math.Pow10(e)
			if !inRange(v) {
				continue
			}
			switch {
			case isLabel[v]:
				ticks = append(ticks, plot.Tick{Value: v, Label: t.format(v)})
			case minor || m == 1:
				ticks = append(ticks, plot.Tick{Value: v})
			}
		}
	}
	return ticks
}

// linearTicks labels multiples of 1, 2, 2.5 or 5 times a power of ten, five to eight of them
// (gonum's default aims at three, which leaves a panel with two labels), with one minor tick
// between labels.
type linearTicks struct{ format func(float64) string }

func (t linearTicks) Ticks(min, max float64) []plot.Tick {
	if !(max > min) || math.IsInf(min, 0) || math.IsInf(max, 0) {
		return nil
	}
	step := linearStep(min, max)
	if !(step > 0) || math.IsInf(step, 0) {
		return nil
	}
	var ticks []plot.Tick
	first := math.Ceil(min/step-1e-9) - 1 // one minor tick below the first label, if in range
	for k := first; k*step <= max+step*1e-9; k++ {
		v := k * step
		if v >= min-step*1e-9 {
			if math.Abs(v) < step*1e-9 {
				v = 0
			}
			ticks = append(ticks, plot.Tick{Value: v, Label: t.format(v)})
		}
		if minor := v + step/2; minor >= min && minor <= max {
			ticks = append(ticks, plot.Tick{Value: minor})
		}
	}
	return ticks
}

// linearStep is the distance between labels on [min, max].
func linearStep(min, max float64) float64 { return niceStep((max - min) / 7) }

// niceStep rounds a step up to 1, 2, 2.5 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	mag := math.Pow10(int(math.Floor(math.Log10(raw))))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw*(1-1e-9) {
			return m * mag
		}
	}
	return 10 * mag
}

// indexTicks labels the integer positions 0..n-1 of a categorical axis (the heat map's cells),
// every stride-th one, starting with the first.
func indexTicks(labels []string, stride int) plot.ConstantTicks {
	ticks := make(plot.ConstantTicks, len(labels))
	for i, l := range labels {
		ticks[i] = plot.Tick{Value: float64(i)}
		if i%stride == 0 {
			ticks[i].Label = l
		}
	}
	return ticks
}

// siLabel writes a decimal quantity with a k/M/G suffix: 20000 -> "20k", 1500 -> "1.5k".
func siLabel(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e9:
		return shortNumber(v/1e9) + "G"
	case a >= 1e6:
		return shortNumber(v/1e6) + "M"
	case a >= 1e3:
		return shortNumber(v/1e3) + "k"
	}
	return shortNumber(v)
}

// plainLabel writes a number without suffix: 0.1, 2.5, 40, 1000.
func plainLabel(v float64) string {
	if math.Abs(v) >= 1000 {
		return strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	}
	return shortNumber(v)
}

// shortNumber writes at most three significant digits, without trailing zeros.
func shortNumber(v float64) string {
	if v == 0 {
		return "0"
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// batchLabel writes a batch size: 1, 2, 4 ... 256.
func batchLabel(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// contextLabel writes a context length in tokens with binary suffixes, as the field does:
// 4096 -> "4k", 32768 -> "32k", 1048576 -> "1M".
func contextLabel(v float64) string {
	n := int64(math.Round(v))
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dk", n>>10)
	case n >= 1<<10:
		return shortNumber(v/1024) + "k"
	}
	return strconv.FormatInt(n, 10)
}

// pow2Extent widens a range to whole powers of two, so that the first and last batch sizes sit
// on labelled ticks.
func pow2Extent(e extent) extent {
	lo := math.Exp2(math.Floor(math.Log2(e.Min) + 1e-9))
	hi := math.Exp2(math.Ceil(math.Log2(e.Max) - 1e-9))
	if hi <= lo {
		hi = lo * 2
		if lo >= 2 {
			lo /= 2
		}
	}
	if !(lo > 0) || math.IsInf(hi, 1) {
		return e
	}
	return extent{lo, hi}
}

// logPadded widens a positive range by a few percent of its decades on each side (at least
// 0.08 decade, a factor 1.2), so markers at the ends are not cut by the frame.
func logPadded(e extent) extent {
	span := math.Log10(e.Max / e.Min)
	pad := math.Max(0.06*span, 0.08)
	r := extent{e.Min / math.Pow(10, pad), e.Max * math.Pow(10, pad)}
	if !(r.Min > 0) || math.IsInf(r.Max, 1) {
		return e // values near the ends of float64: no room to pad
	}
	return r
}

// linearPadded widens a linear range by 6% on each side, stopping at zero.
func linearPadded(e extent) extent {
	pad := 0.06 * (e.Max - e.Min)
	if pad == 0 {
		pad = 0.1 * math.Abs(e.Max)
	}
	return extent{math.Max(0, e.Min-pad), e.Max + pad}
}

// zeroBased is a linear range from zero to the first tick label at least 4% above the largest
// value: speeds are shown against zero so that comparisons by eye are honest, and the top of the
// axis is labelled.
func zeroBased(e extent) extent {
	top := e.Max * 1.04
	if !(top > 0) || math.IsInf(top, 0) {
		return extent{0, e.Max}
	}
	// The smallest multiple of a nice step that the ticker labels with that same step.
	for step := niceStep(top / 10); step <= top*2; step = niceStep(step * 1.01) {
		if labelled := math.Ceil(top/step-1e-9) * step; math.Abs(linearStep(0, labelled)-step) <= step*1e-9 {
			return extent{0, labelled}
		}
	}
	return extent{0, top}
}
