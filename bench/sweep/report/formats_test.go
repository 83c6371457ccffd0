package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/sweep"
)

// formatsRun is Llama-3-8B on a pretend H200 in bf16, fp8 and int4 g128, as
// `sweep --weight-dtype bf16,fp8,int4` names them.
func formatsRun(t *testing.T) synthRun {
	t.Helper()
	run := synthRun{card: "NVIDIA H200", uuid: "GPU-h200", batches: []int{1, 4, 16, 64, 256}, contexts: []int{4096},
		bandwidth: 4.3e12, flops: 700e12, efficiency: 0.8}
	for _, name := range []string{"bf16", "fp8", "int4"} {
		w, err := sweep.ParseWeightDType(name, 0, false)
		if err != nil {
			t.Fatal(err)
		}
		run.formats = append(run.formats, sweep.NamedByFormat(w.Apply(llama8b(t))))
	}
	run.model = run.formats[0]
	return run
}

// A run of one model in several formats gets the per-format charts (one curve per format) in
// a section before the results; a run of one format has none.
func TestFormatCharts(t *testing.T) {
	dir := t.TempDir()
	formatsRun(t).write(t, dir)
	if _, err := Write(dir); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, MarkdownFile))
	at, results := strings.Index(string(md), "## Weight formats: Llama-3-8B\n"), strings.Index(string(md), "## Results")
	if at < 0 || results < at {
		t.Fatalf("report.md has no weight-format section before the results (at %d, results at %d)", at, results)
	}
	for _, name := range []string{"formats_tokens_vs_batch", "formats_tradeoff", "formats_roofline"} {
		svg, err := os.ReadFile(filepath.Join(dir, PlotsDir, "llama-3-8b-"+name+".svg"))
		if err != nil {
			t.Fatal(err)
		}
		for _, legend := range []string{">bf16", ">fp8", ">int4 g128"} {
			if !strings.Contains(string(svg), legend) {
				t.Errorf("%s has no %q in its legend", name, legend)
			}
		}
	}
	families := formatFamilies(withSteps(byModel(mustLoad(t, dir).Info, mustLoad(t, dir).Records), nil))
	if len(families) != 1 || len(families[0].models) != 3 || families[0].name != "Llama-3-8B" {
		t.Errorf("families %+v: want Llama-3-8B in 3 formats", families)
	}

	one := t.TempDir()
	run := h200Run(t)
	run.write(t, one)
	if _, err := Write(one); err != nil {
		t.Fatal(err)
	}
	if md, _ := os.ReadFile(filepath.Join(one, MarkdownFile)); strings.Contains(string(md), "Weight formats") {
		t.Errorf("a run of one format has a weight-format section")
	}
	// Two models of one format are no family either.
	if f := formatFamilies([]modelResults{{shape: llama8b(t)}, {shape: mustShape(t, "qwen2.5-7b")}}); len(f) != 0 {
		t.Errorf("two models in one format make the families %+v", f)
	}
}

func mustLoad(t *testing.T, dir string) sweep.Prior {
	t.Helper()
	p, err := sweep.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustShape(t *testing.T, name string) model.Shape {
	t.Helper()
	s, err := model.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
