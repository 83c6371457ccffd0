package report

import (
	"bytes"
	"cmp"
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/decodebench/decodebench/bench/atomicfile"
	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/sweep"
)

// Files a comparison writes into its directory.
const (
	CompareHTMLFile     = "compare.html"
	CompareMarkdownFile = "compare.md"
	CompareCSVFile      = "compare.csv"
)

// maxCompareContexts is how many shared context lengths get their own overlaid chart.
const maxCompareContexts = 4

// Pair is one configuration measured ok in both runs.
type Pair struct {
	Model   string
	Batch   int
	Context int
	A, B    sweep.Record
	// Interval is the confidence interval of ServerRatio from the kept samples of the
	// step's kernels (HasInterval false, and NoInterval says why, when they are not there);
	// Verdict places it against the gate's threshold.
	Interval    Interval
	HasInterval bool
	NoInterval  string
	Verdict     string
}

// ServerRatio is B's per-server tokens/s over A's (per-request has the same ratio: both are
// set by the step time at one batch).
func (p Pair) ServerRatio() float64 { return p.B.PerServerTokensPerSec / p.A.PerServerTokensPerSec }

// KernelPair is one kernel measurement of A beside the one of B that the same kernel of the
// same configuration used.
type KernelPair struct {
	Names              []string // the step's kernels it serves ("qkv_proj", ...)
	Label              string   // the shape ("linear 8x6144x4096")
	KeyA, KeyB         string
	MedianA, MedianB   float64 // seconds per call
	SamplesA, SamplesB int
	Configurations     int // pairs whose steps use it
	Interval           Interval
	HasInterval        bool
	NoInterval         string
	Verdict            string
}

// Ratio is B's speed over A's: A's median time over B's.
func (k KernelPair) Ratio() float64 { return k.MedianA / k.MedianB }

// Unpaired is a configuration measured ok in one run only.
type Unpaired struct {
	Model   string
	Batch   int
	Context int
	In      string // "A" or "B": the run where it is ok
	Other   string // what the other run has: "absent", or its status and reason
}

// Comparison is two run directories side by side.
type Comparison struct {
	DirA, DirB     string
	LabelA, LabelB string
	InfoA, InfoB   sweep.RunInfo
	Gate           Gate
	Pairs          []Pair       // sorted by model, context, batch
	Kernels        []KernelPair // in order of first use by the pairs
	Unpaired       []Unpaired   // sorted like the pairs, A's first
	OnlyA, OnlyB   int          // configurations ok in one run only
	Notes          []string     // how the runs were matched

	// batches lists, per context, every batch either run has a record of: a batch without a
	// pair is a gap in the overlaid curves, never bridged.
	batches map[int][]int
}

// GeoMeanRatio is the geometric mean of B/A over the pairs (0 when there are none).
func (c Comparison) GeoMeanRatio() float64 {
	if len(c.Pairs) == 0 {
		return 0
	}
	var sum float64
	for _, p := range c.Pairs {
		sum += math.Log(p.ServerRatio())
	}
	return math.Exp(sum / float64(len(c.Pairs)))
}

// Regressed reports whether any configuration or kernel of B is SLOWER than A's.
func (c Comparison) Regressed() bool {
	return c.ConfigVerdicts()[VerdictSlower] > 0 || c.KernelVerdicts()[VerdictSlower] > 0
}

// ConfigVerdicts counts the pairs by verdict.
func (c Comparison) ConfigVerdicts() map[string]int {
	n := map[string]int{}
	for _, p := range c.Pairs {
		n[p.Verdict]++
	}
	return n
}

// KernelVerdicts counts the kernel pairs by verdict.
func (c Comparison) KernelVerdicts() map[string]int {
	n := map[string]int{}
	for _, k := range c.Kernels {
		n[k.Verdict]++
	}
	return n
}

// Compare is CompareWith under DefaultGate.
func Compare(dirA, dirB string) (Comparison, error) { return CompareWith(dirA, dirB, DefaultGate) }

// CompareWith matches the ok records of two run directories by model, weight and KV formats,
// batch and context (compareKey), and judges each pair and each kernel measurement under gate.
// Two runs of different models or formats (bf16 against fp8) have nothing to compare: an error
// names what each run measured, and no verdict gates on them.
func CompareWith(dirA, dirB string, gate Gate) (Comparison, error) {
	c := Comparison{DirA: dirA, DirB: dirB, Gate: gate}
	if err := gate.Validate(); err != nil {
		return c, err
	}
	a, err := sweep.Load(dirA)
	if err != nil {
		return c, err
	}
	b, err := sweep.Load(dirB)
	if err != nil {
		return c, err
	}
	c.InfoA, c.InfoB = a.Info, b.Info
	c.Notes = append(c.Notes, readNotes("A", dirA, a)...)
	c.Notes = append(c.Notes, readNotes("B", dirB, b)...)
	c.LabelA, c.LabelB = runLabels(dirA, dirB, a.Info, b.Info)

	c.batches = map[int][]int{}
	for _, r := range append(slices.Clone(a.Records), b.Records...) {
		if !slices.Contains(c.batches[r.Context], r.Batch) {
			c.batches[r.Context] = append(c.batches[r.Context], r.Batch)
		}
	}
	for ctx := range c.batches {
		slices.Sort(c.batches[ctx])
	}
	key := compareKey
	allA, allB := map[string]sweep.Record{}, map[string]sweep.Record{}
	for _, r := range a.Records {
		allA[key(r)] = r
	}
	for _, r := range b.Records {
		allB[key(r)] = r
	}
	for _, r := range okRecords(a.Records) {
		rb, ok := allB[key(r)]
		switch {
		case ok && rb.Status == measure.StatusOK:
			c.Pairs = append(c.Pairs, Pair{Model: r.Model, Batch: r.Batch, Context: r.Context, A: r, B: rb})
		default:
			c.OnlyA++
			c.Unpaired = append(c.Unpaired, Unpaired{Model: r.Model, Batch: r.Batch, Context: r.Context, In: "A", Other: otherStatus(rb, ok)})
		}
	}
	for _, r := range okRecords(b.Records) {
		if ra, ok := allA[key(r)]; !ok || ra.Status != measure.StatusOK {
			c.OnlyB++
			c.Unpaired = append(c.Unpaired, Unpaired{Model: r.Model, Batch: r.Batch, Context: r.Context, In: "B", Other: otherStatus(ra, ok)})
		}
	}
	slices.SortFunc(c.Pairs, func(x, y Pair) int {
		return cmp.Or(cmp.Compare(x.Model, y.Model), cmp.Compare(x.Context, y.Context), cmp.Compare(x.Batch, y.Batch))
	})
	slices.SortStableFunc(c.Unpaired, func(x, y Unpaired) int {
		return cmp.Or(cmp.Compare(x.In, y.In), cmp.Compare(x.Model, y.Model), cmp.Compare(x.Context, y.Context), cmp.Compare(x.Batch, y.Batch))
	})
	if len(c.Pairs) == 0 {
		why := ""
		if len(a.Implausible)+len(b.Implausible) > 0 {
			why = "; " + strings.Join(c.Notes, "; ")
		}
		if ma, mb := runModelsFormats(a.Records), runModelsFormats(b.Records); ma != mb {
			why += fmt.Sprintf("; they are not comparable: %s measured %s, %s measured %s", dirA, ma, dirB, mb)
		}
		return c, fmt.Errorf("%s and %s have no configuration measured ok in both (model, weight and KV formats, batch and context must match)%s", dirA, dirB, why)
	}
	c.judge(newResampler(gate, a.Kernels, 0), newResampler(gate, b.Kernels, 1))
	return c, nil
}

// readNotes says what reading the run directory dir (side A or B) passed over: lines that
// could not be read, a torn last line, records held as failed, a missing kernels.jsonl.
func readNotes(side, dir string, p sweep.Prior) []string {
	var notes []string
	if p.BadLines > 0 {
		notes = append(notes, fmt.Sprintf("%s: %d line(s) of %s could not be read and were left out", side, p.BadLines, dir))
	}
	if p.Duplicates > 0 {
		notes = append(notes, fmt.Sprintf("%s: %d line(s) of %s recorded a configuration again: the latest of each was kept", side, p.Duplicates, dir))
	}
	for _, name := range p.Repaired {
		notes = append(notes, fmt.Sprintf("%s: the last line of %s was torn (a crash mid-write) and was left out", side, filepath.Join(dir, name)))
	}
	for _, why := range p.Implausible {
		notes = append(notes, fmt.Sprintf("%s: left out, not a speed: %s", side, why))
	}
	if _, err := os.Stat(filepath.Join(dir, sweep.KernelsFile)); err != nil {
		notes = append(notes, fmt.Sprintf("%s: %s has no %s: no kept samples, so no interval and no verdict but UNSURE", side, dir, sweep.KernelsFile))
	}
	return notes
}

// compareKey is what two records must share to be compared: the model (its key holds its
// shape and formats), the formats as the record names them, the batch and the context.
func compareKey(r sweep.Record) string {
	return fmt.Sprintf("%s|%s|%s|%s|%d|%d", r.ModelKey, r.DType, r.WeightFormat, r.KVDType, r.Batch, r.Context)
}

// runModelsFormats names the models and formats of records: "Llama-3-8B (bf16 weights, bf16 KV)".
func runModelsFormats(records []sweep.Record) string {
	var names []string
	for _, r := range records {
		n := fmt.Sprintf("%s (%s weights, %s KV)", r.Model, orDash(r.WeightFormat), orDash(r.KVDType))
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		return "nothing"
	}
	return strings.Join(names, ", ")
}

// otherStatus says what the other run holds of a configuration.
func otherStatus(r sweep.Record, ok bool) string {
	if !ok {
		return "absent"
	}
	if r.Reason == "" {
		return r.Status
	}
	return r.Status + ": " + r.Reason
}

func okRecords(records []sweep.Record) []sweep.Record {
	var out []sweep.Record
	for _, r := range records {
		if r.Status == measure.StatusOK {
			out = append(out, r)
		}
	}
	return out
}

// runLabels names each run by its card, model and date (run.json), adding the time, then the
// directory, where that leaves the two alike.
func runLabels(dirA, dirB string, a, b sweep.RunInfo) (string, string) {
	label := func(info sweep.RunInfo, layout string) string {
		return strings.Join([]string{orDash(info.Card.Name), runModels(info), info.Started.UTC().Format(layout)}, " · ")
	}
	la, lb := label(a, "2006-01-02"), label(b, "2006-01-02")
	if la == lb {
		la, lb = label(a, "2006-01-02 15:04 UTC"), label(b, "2006-01-02 15:04 UTC")
	}
	if la == lb {
		la, lb = la+" ("+filepath.Base(filepath.Clean(dirA))+")", lb+" ("+filepath.Base(filepath.Clean(dirB))+")"
	}
	if la == lb {
		la, lb = "A: "+la, "B: "+lb
	}
	if a.Backend.Emulated {
		la += " [emulated]"
	}
	if b.Backend.Emulated {
		lb += " [emulated]"
	}
	return la, lb
}

// runModels names the model of a run, or how many it measured.
func runModels(info sweep.RunInfo) string {
	switch n := len(info.Axes.Models); n {
	case 0:
		return "–"
	case 1:
		return info.Axes.Models[0].Name
	default:
		return fmt.Sprintf("%d models", n)
	}
}

func star(b bool) string {
	if b {
		return "*"
	}
	return ""
}

func writeCompareCSV(c Comparison, path string) error {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	w.Write([]string{"model", "batch", "context", "a_per_server_tokens_per_s", "b_per_server_tokens_per_s", "a_per_request_tokens_per_s",
		"b_per_request_tokens_per_s", "ratio_b_over_a", "ratio_lo", "ratio_hi", "verdict", "a_roofline_fraction", "b_roofline_fraction", "a_throttled", "b_throttled"})
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', 8, 64) }
	for _, p := range c.Pairs {
		lo, hi := "", ""
		if p.HasInterval {
			lo, hi = g(p.Interval.Lo), g(p.Interval.Hi)
		}
		w.Write([]string{p.Model, strconv.Itoa(p.Batch), strconv.Itoa(p.Context), g(p.A.PerServerTokensPerSec), g(p.B.PerServerTokensPerSec),
			g(p.A.PerRequestTokensPerSec), g(p.B.PerRequestTokensPerSec), g(p.ServerRatio()), lo, hi, p.Verdict, g(p.A.RooflineFraction), g(p.B.RooflineFraction),
			strconv.FormatBool(p.A.Throttled), strconv.FormatBool(p.B.Throttled)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return err
	}
	return atomicfile.Write(path, buf.Bytes())
}
