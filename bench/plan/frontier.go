// Package plan turns tokens/s into capacity and cost: for a streaming target per request and a
// traffic, the largest batch that meets the target, the GPUs the traffic needs at that batch
// and what a million output tokens cost. It reads a frontier, the per-request tokens/s at every
// batch of one model at one context, either measured (a sweep's records) or predicted (the
// roofline bound of a spec row).
package plan

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/roofline"
	"github.com/decodebench/decodebench/bench/sweep"
)

// Where a point of the frontier comes from.
const (
	SourceMeasured     = "measured"     // a sweep's record at this batch
	SourceInterpolated = "interpolated" // between two measured batches (see Interpolation)
	SourcePredicted    = "predicted"    // the roofline bound of a spec row
)

// Interpolation says how a measured frontier is read between its batches.
const Interpolation = "between two measured batches, per-request tokens/s is interpolated linearly in log batch and " +
	"log tokens/s (a power law through the two: exact at them, monotone between them); never beyond the measured batches"

// maxPredictedBatch bounds a predicted frontier where everything fits (a context without KV).
const maxPredictedBatch = 1 << 16

// Point is one batch of a frontier.
type Point struct {
	Batch                  int     `json:"batch"`
	PerRequestTokensPerSec float64 `json:"per_request_tokens_per_s"`
	PerServerTokensPerSec  float64 `json:"per_server_tokens_per_s"`
	Source                 string  `json:"source"`
}

// Frontier is the per-request tokens/s of one model at one context, at every batch from its
// first knot to its last.
type Frontier struct {
	Model   string `json:"model"`
	Context int    `json:"context"`
	TP      int    `json:"tp"` // GPUs per server: the frontier is one tensor-parallel group's
	Card    string `json:"card"`
	Source  string `json:"source"` // SourceMeasured or SourcePredicted
	// Knots are the batches known, ascending: the measured ones, or for a prediction the
	// powers of two up to the largest batch that fits, and that batch.
	Knots []Point `json:"knots"`
	// predict gives any batch of a predicted frontier; nil for a measured one.
	predict func(batch int) Point
}

// Range is the first and last batch of the frontier.
func (f Frontier) Range() (lo, hi int) { return f.Knots[0].Batch, f.Knots[len(f.Knots)-1].Batch }

// RangeText names the range: "batches 1–256 measured".
func (f Frontier) RangeText() string {
	lo, hi := f.Range()
	return fmt.Sprintf("batches %d–%d %s", lo, hi, f.Source)
}

// At is the frontier at batch: a knot, a prediction, or an interpolation between the two
// measured knots either side. It refuses a batch outside the range: nothing is extrapolated.
func (f Frontier) At(batch int) (Point, error) {
	lo, hi := f.Range()
	if batch < lo || batch > hi {
		return Point{}, fmt.Errorf("batch %d is outside the %s: a plan does not extrapolate", batch, f.RangeText())
	}
	if f.predict != nil {
		return f.predict(batch), nil
	}
	i, found := slices.BinarySearchFunc(f.Knots, batch, func(p Point, b int) int { return p.Batch - b })
	if found {
		return f.Knots[i], nil
	}
	a, b := f.Knots[i-1], f.Knots[i]
	t := (math.Log(float64(batch)) - math.Log(float64(a.Batch))) / (math.Log(float64(b.Batch)) - math.Log(float64(a.Batch)))
	rate := math.Exp(math.Log(a.PerRequestTokensPerSec) + t*(math.Log(b.PerRequestTokensPerSec)-math.Log(a.PerRequestTokensPerSec)))
	return Point{Batch: batch, PerRequestTokensPerSec: rate, PerServerTokensPerSec: float64(batch) * rate, Source: SourceInterpolated}, nil
}

// Measured is the frontier of one model at one context from a run's records. modelName picks
// the model when the run has several (by name or model key, case-insensitive); context 0 picks
// the run's only context. The notes name the configurations left out (failed, skipped,
// throttled, emulated).
func Measured(dir string, records []sweep.Record, card string, modelName string, context int) (Frontier, []string, error) {
	var ok []sweep.Record
	for _, r := range records {
		if r.Status == measure.StatusOK && r.PerRequestTokensPerSec > 0 {
			ok = append(ok, r)
		}
	}
	if len(ok) == 0 {
		return Frontier{}, nil, fmt.Errorf("%s has no configuration measured ok: a plan needs per-request tokens/s at one batch or more", dir)
	}
	keys := distinct(ok, func(r sweep.Record) string { return r.ModelKey })
	var names []string
	for _, k := range keys {
		for _, r := range ok {
			if r.ModelKey == k {
				names = append(names, r.Model)
				break
			}
		}
	}
	var chosen []string
	for i, k := range keys {
		if modelName == "" || strings.EqualFold(names[i], modelName) || strings.EqualFold(k, modelName) || presetName(modelName) == names[i] {
			chosen = append(chosen, k)
		}
	}
	switch {
	case len(chosen) == 0:
		return Frontier{}, nil, fmt.Errorf("%s has no configuration of model %q measured ok: it has %s", dir, modelName, strings.Join(names, ", "))
	case len(chosen) > 1 && modelName == "":
		return Frontier{}, nil, fmt.Errorf("%s holds %d models (%s): choose one with --model", dir, len(chosen), strings.Join(names, ", "))
	case len(chosen) > 1:
		return Frontier{}, nil, fmt.Errorf("%s holds %d models named %q: choose one with --model and its model key (%s)", dir, len(chosen), modelName, strings.Join(chosen, ", "))
	}
	var ofModel []sweep.Record
	for _, r := range ok {
		if r.ModelKey == chosen[0] {
			ofModel = append(ofModel, r)
		}
	}
	contexts := distinctInts(ofModel, func(r sweep.Record) int { return r.Context })
	switch {
	case context == 0 && len(contexts) > 1:
		return Frontier{}, nil, fmt.Errorf("%s measured %s ok at %d contexts (%s): choose one with --context", dir, ofModel[0].Model, len(contexts), contextsText(contexts))
	case context == 0:
		context = contexts[0]
	case !slices.Contains(contexts, context):
		return Frontier{}, nil, fmt.Errorf("%s has no configuration of %s measured ok at context %d: it has contexts %s (a plan does not interpolate between contexts)",
			dir, ofModel[0].Model, context, contextsText(contexts))
	}
	f := Frontier{Model: ofModel[0].Model, Context: context, TP: max(ofModel[0].TP, 1), Card: card, Source: SourceMeasured}
	var notes []string
	for _, r := range records {
		if r.Context != context || r.ModelKey != chosen[0] {
			continue
		}
		if r.Status != measure.StatusOK {
			notes = append(notes, fmt.Sprintf("batch %d is %s (%s): not on the frontier", r.Batch, r.Status, r.Reason))
			continue
		}
		if r.Throttled {
			notes = append(notes, fmt.Sprintf("batch %d was measured while the card throttled: its tokens/s may be low", r.Batch))
		}
		if r.Emulated {
			notes = appendOnce(notes, "EMULATED: the run's times come from the CPU emulator and are not a speed; this plan is an exercise")
		}
		f.Knots = append(f.Knots, Point{Batch: r.Batch, PerRequestTokensPerSec: r.PerRequestTokensPerSec,
			PerServerTokensPerSec: r.PerServerTokensPerSec, Source: SourceMeasured})
	}
	slices.SortFunc(f.Knots, func(a, b Point) int { return a.Batch - b.Batch })
	return f, notes, nil
}

// Predicted is the roofline bound of shape on gpu at one context, at every batch from 1 to the
// largest whose KV cache fits beside the weights (reserve kept free).
func Predicted(shape model.Shape, gpu roofline.GPU, context int, reserve float64) (Frontier, error) {
	ceiling := roofline.DatasheetCeiling(gpu)
	if err := ceiling.Validate(); err != nil {
		return Frontier{}, fmt.Errorf("%s: %v", gpu.Key, err)
	}
	maxFit := min(roofline.MaxBatchThatFits(shape, gpu.MemoryBytes, context, reserve), maxPredictedBatch)
	if maxFit < 1 {
		return Frontier{}, fmt.Errorf("%s does not fit on one %s at context %d with %.0f%% of its memory kept free, not even at batch 1: shard it with --tp",
			shape.Name, gpu.Name, context, reserve*100)
	}
	f := Frontier{Model: shape.Name, Context: context, TP: max(shape.TP, 1), Card: gpu.Name, Source: SourcePredicted}
	f.predict = func(batch int) Point {
		b := roofline.StepBound(shape, ceiling, batch, context)
		return Point{Batch: batch, PerRequestTokensPerSec: b.PerRequestTokensPerSec, PerServerTokensPerSec: b.PerServerTokensPerSec, Source: SourcePredicted}
	}
	for b := 1; b < maxFit; b *= 2 {
		f.Knots = append(f.Knots, f.predict(b))
	}
	f.Knots = append(f.Knots, f.predict(maxFit))
	return f, nil
}

func presetName(name string) string {
	if s, err := model.Lookup(name); err == nil {
		return s.Name
	}
	return ""
}

func distinct(rs []sweep.Record, key func(sweep.Record) string) []string {
	var out []string
	for _, r := range rs {
		if k := key(r); !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

func distinctInts(rs []sweep.Record, key func(sweep.Record) int) []int {
	var out []int
	for _, r := range rs {
		if k := key(r); !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func contextsText(contexts []int) string {
	var parts []string
	for _, c := range contexts {
		parts = append(parts, strconv.Itoa(c))
	}
	return strings.Join(parts, ", ")
}

func appendOnce(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}
