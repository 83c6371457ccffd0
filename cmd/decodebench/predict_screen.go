package main

// What predict prints for people: a few lines on what the numbers are, a table that fits an
// 80-column terminal, what fits in memory, the files written (every chart by its path), and
// last the headline, so that what a reader must not miss (a prediction, not a measurement)
// is what stays on the screen.

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/decodebench/decodebench/bench/format"
	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/roofline"
	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/bench/units"
)

// screenWidth is the terminal predict's prose and table are written for.
const screenWidth = 80

// printLines writes each line wrapped at screenWidth, keeping its indent, continuations
// indented further.
func printLines(w io.Writer, lines ...string) {
	for _, l := range lines {
		text := strings.TrimLeft(l, " ")
		indent := l[:len(l)-len(text)]
		for _, part := range wrap(text, screenWidth-len(indent)) {
			fmt.Fprintln(w, strings.TrimRight(indent+part, " "))
		}
	}
}

// predictAbout says what the numbers of one model and card are: the weights stored against
// those a step reads (the table's WEIGHTS column), the KV cache, the ceiling and its source,
// and the card's memory in the units the card's name uses.
func predictAbout(s model.Shape, gpu roofline.GPU, ceiling roofline.Ceiling) []string {
	lines := []string{fmt.Sprintf("%s (%s weights, %s KV cache) on one %s, tp %d: the roofline bound, a prediction",
		s.Name, weightFormatText(s), s.KVDType, gpu.Name, max(s.TP, 1))}
	lines = append(lines, "  "+weightsRead(s))
	lines = append(lines, fmt.Sprintf("  KV cache: %s per token of context, read for every sequence each step", units.Bytes(s.KVBytesPerToken())))
	if state := s.StateBytesPerSequence(); state > 0 {
		// Why a hybrid's tokens/s falls more slowly with the context than a dense model's.
		lines = append(lines, fmt.Sprintf("  recurrent state: %s a sequence, read and written each step at any context by the %d of %d layers that cache no KV, so tokens/s falls slowly with context",
			units.Bytes(state), s.RecurrentLayers(), s.Layers))
	}
	lines = append(lines, fmt.Sprintf("  ceiling: %.0f GB/s, %.0f TFLOP/s dense bf16, from the %s",
		ceiling.BandwidthBytesPerSec/1e9, ceiling.FLOPsPerSec/1e12, gpu.Source))
	lines = append(lines, "  memory: "+memoryText(gpu)+"; decimal units throughout (1 GB = 1e9 bytes)")
	return lines
}

// weightsRead tells the weights a model stores from those one step reads at batch 1 (the
// table's WEIGHTS column; model.Shape.WeightBytesPerStep): an untied embedding table is looked
// up one row a sequence, and a mixture of experts reads only the experts the batch touches.
func weightsRead(s model.Shape) string {
	total, step := s.WeightBytesTotal(), s.WeightBytesPerStep(1)
	if math.Abs(total-step) < 0.5e7 { // equal to the table's 2 decimals
		return fmt.Sprintf("weights: %s, all read every step (the WEIGHTS column)", units.Bytes(total))
	}
	var why []string
	if s.IsMoE() {
		why = append(why, fmt.Sprintf("of each layer's %d experts only those its tokens are routed to (%d at batch 1, more as the batch grows)",
			s.Experts, s.ExpertsPerToken))
	}
	if !s.TiedEmbeddings {
		why = append(why, "of the embedding table only the batch's rows (one a sequence)")
	}
	return fmt.Sprintf("weights: %s stored; a step at batch 1 reads %s of them (the WEIGHTS column): %s",
		units.Bytes(total), units.Bytes(step), strings.Join(why, "; "))
}

// vendorGB finds the "141GB" of a card's name.
var vendorGB = regexp.MustCompile(`(\d+)\s*GB\b`)

// memoryText is the card's memory in decimal GB, as every number here is, beside the
// vendor's "GB" in its name, which counts GiB (roofline's package comment): an H200's "141GB"
// is 141 x 2^30 = 151.40e9 bytes.
func memoryText(gpu roofline.GPU) string {
	gib := gpu.MemoryBytes / (1 << 30)
	text := fmt.Sprintf("%s = %s GiB", units.Bytes(gpu.MemoryBytes), format.Human(math.Round(gib*10)/10))
	if m := vendorGB.FindStringSubmatch(gpu.Name); m != nil {
		if n, _ := strconv.Atoi(m[1]); float64(n) == math.Round(gib) {
			text += fmt.Sprintf(" (the %q of the card's name counts GiB, 2^30 bytes)", m[1]+"GB")
		}
	}
	return text
}

// printPredictTable writes the rows of one weight format in at most 80 columns: sizes in GB
// and times in ms rounded for people (predict.csv and --format json keep every digit).
func printPredictTable(out io.Writer, rows []predictRow) error {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "\t\tWEIGHTS\tKV\tSTEP\tTOKENS/S\tTOKENS/S\t\t\t")
	fmt.Fprintln(w, "CONTEXT\tBATCH\tGB\tGB\tms\tPER-REQUEST\tPER-SERVER\tBOUND\tFITS\t")
	for _, r := range rows {
		fits := "yes"
		if !r.FitsInMemory {
			fits = "no"
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", contextLabel(r.Context), r.Batch,
			gb(r.WeightBytes), gb(r.KVBytes), format.Human(round4(r.StepSeconds*1e3)),
			format.Human(round4(r.PerRequestTokensPerSec)), format.Human(math.Round(r.PerServerTokensPerSec)), r.Bound, fits)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, line := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		if _, err := fmt.Fprintln(out, strings.TrimRight(line, " ")); err != nil {
			return err
		}
	}
	return nil
}

// gb is a byte count in GB for a column headed GB, to 4 significant digits.
func gb(bytes float64) string { return format.Human(round4(bytes / 1e9)) }

// round4 rounds to 4 significant digits, so that a whole number (317.0) prints as one.
func round4(v float64) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	scale := math.Pow(10, 3-math.Floor(math.Log10(math.Abs(v))))
	return math.Round(v*scale) / scale
}

// predictLimits says, per context, the largest batch that fits in memory and where compute
// takes over from memory as the bound.
func predictLimits(s model.Shape, gpu roofline.GPU, ceiling roofline.Ceiling, contexts []int, reserve float64) []string {
	usable := fmt.Sprintf("%s (%s less %.0f%% kept free)", units.Bytes(gpu.MemoryBytes*(1-reserve)), units.Bytes(gpu.MemoryBytes), reserve*100)
	var fits, compute []string
	none := false
	for _, ctx := range contexts {
		n := roofline.MaxBatchThatFits(s, gpu.MemoryBytes, ctx, reserve)
		none = none || n == 0
		fits = append(fits, fmt.Sprintf("%s: %d", contextLabel(ctx), n))
		if crit, ok := roofline.CriticalBatch(s, ceiling, ctx, 1<<16); ok {
			compute = append(compute, fmt.Sprintf("%s: from batch %d", contextLabel(ctx), crit))
		}
	}
	fit := "largest batch that fits in " + usable + ", by context: " + strings.Join(fits, ", ")
	if none {
		fit += "; 0: not even batch 1 fits, shard it with --tp"
	}
	lines := []string{fit}
	crit, ok := roofline.CriticalBatch(s, ceiling, 0, 1<<16)
	weights := "weights alone (no KV cache) would turn the step compute-bound from batch " + strconv.Itoa(crit)
	if !ok {
		weights = "weights alone (no KV cache) keep the step memory-bound up to batch 65536"
	}
	if len(compute) == 0 {
		lines = append(lines, weights+"; with the KV cache it stays memory-bound at every context shown")
	} else {
		lines = append(lines, weights+"; with the KV cache, compute bounds it at "+strings.Join(compute, ", "))
	}
	return lines
}

// chartTopics are the charts predict draws, by file name, in a few words.
var chartTopics = map[string]string{
	"tokens_vs_batch": "tokens/s against batch",
	"tradeoff":        "per-request vs per-server tokens/s",
	"roofline":        "each kernel on the roofline",
}

// predictFiles names every file written: the rows, then each chart by its path.
func predictFiles(dir string, paths []string) []string {
	var rows, charts []string
	for _, p := range paths {
		ext := filepath.Ext(p)
		switch ext {
		case ".csv", ".json":
			rows = append(rows, p)
		case ".png":
			charts = append(charts, p)
		}
	}
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintf(w, "  %s\tevery row, every digit\n", r)
	}
	for _, c := range charts {
		fmt.Fprintf(w, "  %s\t%s\n", c, chartTopics[strings.TrimSuffix(filepath.Base(c), ".png")])
	}
	w.Flush()
	lines := []string{fmt.Sprintf("wrote %d files to %s (each chart also as .svg):", len(paths), dir)}
	return append(lines, strings.Split(strings.TrimRight(b.String(), "\n"), "\n")...)
}

// predictHeadline is predict's last word: that it is a prediction, and for each weight format
// the best per-request rate (the smallest batch at the shortest context) and the best
// per-server rate of the batches that fit.
func predictHeadline(shapes []model.Shape, rows []predictRow, gpu roofline.GPU) []string {
	var lines []string
	for _, s := range shapes {
		of := rowsOf(rows, s)
		if len(of) == 0 {
			continue
		}
		single := of[0]
		for _, r := range of {
			if r.Batch < single.Batch || (r.Batch == single.Batch && r.Context < single.Context) {
				single = r
			}
		}
		name := s.Name
		if len(shapes) > 1 {
			name += " (" + sweep.WeightDTypeLabel(s) + ")"
		}
		line := fmt.Sprintf("%s on one %s: at most %s tokens/s per request (batch %d, context %s)",
			name, gpu.Name, format.Human(round4(single.PerRequestTokensPerSec)), single.Batch, contextLabel(single.Context))
		var peak *predictRow
		for i, r := range of {
			if r.FitsInMemory && (peak == nil || r.PerServerTokensPerSec > peak.PerServerTokensPerSec) {
				peak = &of[i]
			}
		}
		if peak != nil {
			line += fmt.Sprintf(" and %s tokens/s per server (batch %d, context %s: the best of the batches that fit)",
				format.Human(math.Round(peak.PerServerTokensPerSec)), peak.Batch, contextLabel(peak.Context))
		} else {
			line += "; no batch shown fits in memory: try --tp"
		}
		lines = append(lines, line)
	}
	return append(lines, "PREDICTION, not a measurement: the datasheet roofline bound; no kernel ran")
}

// printPredictScreen writes what predict shows people: with the table format all of it on
// out; with the others the rows are on out already, and this prose goes to prose (stderr).
func printPredictScreen(out, prose io.Writer, table bool, shapes []model.Shape, gpu roofline.GPU, ceiling roofline.Ceiling,
	rows []predictRow, contexts []int, reserve float64) error {
	for i, s := range shapes {
		if i > 0 {
			fmt.Fprintln(prose)
		}
		printLines(prose, predictAbout(s, gpu, ceiling)...)
		if table {
			fmt.Fprintln(out)
			if err := printPredictTable(out, rowsOf(rows, s)); err != nil {
				return err
			}
			fmt.Fprintln(out)
		}
		printLines(prose, predictLimits(s, gpu, ceiling, contexts, reserve)...)
	}
	return nil
}
