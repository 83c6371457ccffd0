package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

// attentionCase is one `verify attention` run of the emulator matrix.
type attentionCase struct {
	desc                            string
	batch, qHeads, kvHeads, headDim int
	context                         string // --context
	pageSize, splits                int    // 0 = contiguous, 0 = auto
	dtype                           string
	append                          bool
	variant                         string // --variant; "" leaves it to the plan (auto)
	scale                           string // --scale; "" leaves 1/sqrt(head dim)
	window, chunk                   int    // --window, --chunk; 0 = every token
	sinks                           bool   // --sinks
}

func (c attentionCase) args() []string {
	args := []string{"verify", "attention", "--backend", "emu", "--json",
		"--batch", fmt.Sprint(c.batch), "--q-heads", fmt.Sprint(c.qHeads), "--kv-heads", fmt.Sprint(c.kvHeads),
		"--head-dim", fmt.Sprint(c.headDim), "--context", c.context,
		"--page-size", fmt.Sprint(c.pageSize), "--splits", fmt.Sprint(c.splits), "--seed", fmt.Sprint(c.batch*31 + c.headDim)}
	if c.dtype != "" {
		args = append(args, "--dtype", c.dtype)
	}
	if c.append {
		args = append(args, "--append")
	}
	if c.variant != "" {
		args = append(args, "--variant", c.variant)
	}
	if c.scale != "" {
		args = append(args, "--scale", c.scale)
	}
	if c.window != 0 {
		args = append(args, "--window", fmt.Sprint(c.window))
	}
	if c.chunk != 0 {
		args = append(args, "--chunk", fmt.Sprint(c.chunk))
	}
	if c.sinks {
		args = append(args, "--sinks")
	}
	return args
}

// The matrix, small enough for the emulator: every head dim; groups 1, 4, 7, 8, 16 and
// multi-query past one block's 16 heads; both layouts and every page size class; contexts of
// 1, a few, not a multiple of the page or the tile, and a few thousand; ragged batches; forced
// splits including more than there are tiles; the append kernel before the attention. Every
// case runs with both kernels (attentionVariantMatrix).
var attentionMatrix = []attentionCase{
	// head dims (group 4, a ragged batch with a 1-token sequence)
	{desc: "d64", batch: 2, qHeads: 8, kvHeads: 2, headDim: 64, context: "1,70"},
	{desc: "d80 paged", batch: 2, qHeads: 8, kvHeads: 2, headDim: 80, context: "45,1", pageSize: 16},
	{desc: "d96 fp16", batch: 2, qHeads: 8, kvHeads: 2, headDim: 96, context: "33,5", dtype: "fp16"},
	{desc: "d128 paged fp16", batch: 2, qHeads: 8, kvHeads: 2, headDim: 128, context: "1,40", pageSize: 32, dtype: "fp16"},
	{desc: "d256", batch: 2, qHeads: 8, kvHeads: 2, headDim: 256, context: "17,3", splits: 2},
	{desc: "d256 paged split 5", batch: 1, qHeads: 4, kvHeads: 1, headDim: 256, context: "100", pageSize: 16, splits: 5},

	// group sizes
	{desc: "multi-head", batch: 2, qHeads: 3, kvHeads: 3, headDim: 64, context: "3,33", pageSize: 16, splits: 2},
	{desc: "group 2", batch: 1, qHeads: 4, kvHeads: 2, headDim: 128, context: "50"},
	{desc: "group 7 (Qwen2.5-7B: 28/4)", batch: 2, qHeads: 28, kvHeads: 4, headDim: 128, context: "9,64", pageSize: 16},
	{desc: "group 8 (Llama-3-70B: 64/8)", batch: 1, qHeads: 16, kvHeads: 2, headDim: 128, context: "77", splits: 3},
	{desc: "group 16", batch: 1, qHeads: 16, kvHeads: 1, headDim: 64, context: "20", pageSize: 16},
	{desc: "multi-query 20 heads", batch: 2, qHeads: 20, kvHeads: 1, headDim: 64, context: "5,31", splits: 2},
	{desc: "multi-query 32 heads", batch: 1, qHeads: 32, kvHeads: 1, headDim: 80, context: "40", pageSize: 32},

	// contexts and layouts
	{desc: "context 1 everywhere", batch: 3, qHeads: 4, kvHeads: 1, headDim: 64, context: "1"},
	{desc: "context 1 paged", batch: 3, qHeads: 4, kvHeads: 1, headDim: 128, context: "1", pageSize: 256},
	{desc: "not a multiple of the page", batch: 2, qHeads: 4, kvHeads: 2, headDim: 64, context: "33,100", pageSize: 32, splits: 3},
	{desc: "pages of 64 and a partial tile", batch: 2, qHeads: 4, kvHeads: 2, headDim: 96, context: "65,129", pageSize: 64},
	{desc: "pages of 256", batch: 2, qHeads: 8, kvHeads: 1, headDim: 128, context: "300,257", pageSize: 256, splits: 2},
	{desc: "ragged batch", batch: 5, qHeads: 8, kvHeads: 2, headDim: 128, context: "1,17,256,300,64", pageSize: 32},
	{desc: "a few thousand paged", batch: 1, qHeads: 4, kvHeads: 1, headDim: 128, context: "3000", pageSize: 16},
	{desc: "a few thousand one split", batch: 1, qHeads: 4, kvHeads: 1, headDim: 64, context: "2900", splits: 1},

	// splits
	{desc: "one split", batch: 2, qHeads: 8, kvHeads: 2, headDim: 64, context: "37,200", splits: 1},
	{desc: "7 splits", batch: 2, qHeads: 8, kvHeads: 2, headDim: 64, context: "37,200", splits: 7},
	{desc: "64 splits of a 37-token context", batch: 1, qHeads: 8, kvHeads: 2, headDim: 64, context: "37", splits: 64},
	{desc: "1024 splits", batch: 2, qHeads: 2, kvHeads: 1, headDim: 80, context: "3,130", pageSize: 16, splits: 1024},
	// more than 32 splits that see a token (40 of 32 tokens: one tile of either kernel), so the
	// fused merge's per-head reductions and batches of 16 go round more than once, under the
	// hazard modes too; paged and contiguous, ragged
	{desc: "40 active splits paged", batch: 2, qHeads: 4, kvHeads: 1, headDim: 256, context: "1280,700", pageSize: 16, splits: 40},
	{desc: "40 active splits contiguous", batch: 2, qHeads: 2, kvHeads: 2, headDim: 256, context: "33,1280", splits: 40},

	// a softmax scale that makes scores of several hundred (log2 units): exp2 of an unshifted
	// score overflows fp32, so a kernel that forgets to subtract the running max gives inf/NaN
	{desc: "large softmax scale", batch: 2, qHeads: 8, kvHeads: 2, headDim: 128, context: "100,33", scale: "40"},
	{desc: "large softmax scale split 4", batch: 1, qHeads: 16, kvHeads: 2, headDim: 64, context: "300", pageSize: 32, splits: 4, scale: "60"},

	// batches past 256 with tiny contexts (many blocks, many counters)
	{desc: "batch 257 split 2", batch: 257, qHeads: 2, kvHeads: 1, headDim: 256, context: "20", pageSize: 16, splits: 2},

	// append, then attention that must see the new token
	{desc: "append contiguous", batch: 3, qHeads: 8, kvHeads: 2, headDim: 128, context: "1,17,40", append: true},
	{desc: "append paged", batch: 3, qHeads: 7, kvHeads: 1, headDim: 64, context: "1,16,33", pageSize: 16, splits: 2, append: true},
	{desc: "append paged d256 fp16", batch: 2, qHeads: 4, kvHeads: 2, headDim: 256, context: "300,2", pageSize: 256, dtype: "fp16", append: true},

	// spans and sinks (cgo's attention_spans_test.go has the NaN-poisoned caches): a window
	// that starts mid-page and mid-tile, a chunk boundary at L-1 and at L, sinks with one split
	// and with several, the appended token inside the window
	{desc: "window 77 paged", batch: 3, qHeads: 8, kvHeads: 2, headDim: 128, context: "300,77,5", pageSize: 16, splits: 3, window: 77},
	{desc: "window 1 append", batch: 2, qHeads: 4, kvHeads: 1, headDim: 64, context: "9,130", window: 1, append: true},
	{desc: "chunk 64 fp16", batch: 3, qHeads: 4, kvHeads: 2, headDim: 80, context: "64,65,200", dtype: "fp16", chunk: 64, splits: 2},
	{desc: "sinks one split", batch: 2, qHeads: 8, kvHeads: 2, headDim: 64, context: "40,3", splits: 1, sinks: true},
	{desc: "sinks window 50 split 4 paged", batch: 2, qHeads: 16, kvHeads: 2, headDim: 64, context: "333,20", pageSize: 32, splits: 4, window: 50, sinks: true},
}

// attentionVariantMatrix is attentionMatrix once with the default (auto, which is simt) and once
// with --variant mma.
func attentionVariantMatrix() []attentionCase {
	var cases []attentionCase
	for _, variant := range []string{"", "mma"} {
		for _, c := range attentionMatrix {
			c.variant = variant
			if variant != "" {
				c.desc += " " + variant
			}
			cases = append(cases, c)
		}
	}
	return cases
}

func TestVerifyAttentionMatrix(t *testing.T) {
	useEmu(t)
	for _, c := range attentionVariantMatrix() {
		t.Run(c.desc, func(t *testing.T) {
			out, code, msg := runCLI(t, c.args()...)
			var rep attentionReport
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("exit %d (%s); output is not one JSON object: %v\n%s", code, msg, err, out)
			}
			if code != 0 || !rep.Passed {
				t.Fatalf("exit %d (%s): %s", code, msg, out)
			}
			if rep.Kernel != "attention" || rep.Backend != "emu" || rep.Batch != c.batch || rep.QHeads != c.qHeads ||
				rep.KVHeads != c.kvHeads || rep.HeadDim != c.headDim || rep.Append != c.append || len(rep.Context) != c.batch {
				t.Errorf("report describes another run: %s", out)
			}
			if wantLayout := map[bool]string{true: "paged", false: "contiguous"}[c.pageSize > 0]; rep.Layout != wantLayout || rep.PageSize != c.pageSize {
				t.Errorf("layout %s/%d, want %s/%d", rep.Layout, rep.PageSize, wantLayout, c.pageSize)
			}
			if wantVariant := map[string]string{"": "simt", "mma": "mma"}[c.variant]; rep.Variant != wantVariant {
				t.Errorf("variant %q ran, want %q", rep.Variant, wantVariant)
			}
			if rep.Window != c.window || rep.Chunk != c.chunk || rep.Sinks != c.sinks {
				t.Errorf("span window %d chunk %d sinks %v ran, want %d, %d, %v", rep.Window, rep.Chunk, rep.Sinks, c.window, c.chunk, c.sinks)
			}
			if c.splits > 0 && rep.Splits != c.splits {
				t.Errorf("%d splits asked, %d ran", c.splits, rep.Splits)
			}
			if rep.Splits < 1 || rep.SplitTokens < 1 || (rep.Splits > 1) != (rep.WorkspaceBytes > 0) {
				t.Errorf("plan: %d splits of %d tokens, workspace %d", rep.Splits, rep.SplitTokens, rep.WorkspaceBytes)
			}
		})
	}
}

// Auto splits: a single sequence on few blocks is cut (into whole 64-token tiles at head dim
// 64, never finer) until it fills the card; a batch that fills the card is not.
func TestVerifyAttentionAutoSplits(t *testing.T) {
	useEmu(t)
	for _, c := range []struct {
		args     []string
		min, max int
	}{
		{[]string{"--batch", "1", "--q-heads", "4", "--kv-heads", "1", "--head-dim", "64", "--context", "200"}, 2, 4},
		{[]string{"--batch", "1", "--q-heads", "4", "--kv-heads", "1", "--head-dim", "64", "--context", "2048"}, 2, 32},
		{[]string{"--batch", "64", "--q-heads", "2", "--kv-heads", "1", "--head-dim", "64", "--context", "300"}, 1, 1},
	} {
		out, code, msg := runCLI(t, append([]string{"verify", "attention", "--backend", "emu", "--json"}, c.args...)...)
		var rep attentionReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 {
			t.Fatalf("%v: exit %d (%s) %v", c.args, code, msg, err)
		}
		if rep.Splits < c.min || rep.Splits > c.max || rep.Splits*rep.SplitTokens < (ref.AttentionShape{Context: rep.Context}).MaxContext() ||
			rep.SplitTokens%64 != 0 {
			t.Errorf("%v: %d splits of %d tokens, want %d..%d covering the context", c.args, rep.Splits, rep.SplitTokens, c.min, c.max)
		}
	}
}

func TestVerifyAttentionText(t *testing.T) {
	useEmu(t)
	out, code, msg := runCLI(t, "verify", "attention", "--backend", "emu", "--batch", "2", "--q-heads", "14", "--kv-heads", "2",
		"--head-dim", "128", "--context", "5,40", "--page-size", "16", "--splits", "3", "--append")
	if code != 0 {
		t.Fatalf("exit %d (%s)\n%s", code, msg, out)
	}
	for _, want := range []string{"batch 2, q heads 14, kv heads 2 (group 7), head dim 128, context [5 40]",
		"paged (16-token pages, 3 per sequence)", "last token appended", "emu backend", "plan: simt kernel, 3 split(s) of 32 tokens",
		"relative L2 error", "tolerance 0.01", "worst element", "(seq ", "PASS"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestVerifyAttentionUsageErrors(t *testing.T) {
	hermetic(t, "") // validation comes before any library is looked for
	base := []string{"verify", "attention", "--backend", "emu", "--batch", "2", "--q-heads", "8", "--kv-heads", "2", "--head-dim", "128"}
	with := func(extra ...string) []string { return append(append([]string(nil), base...), extra...) }
	cases := []usageCase{
		{"missing --context", base, "--context"},
		{"missing --head-dim", []string{"verify", "attention", "--batch", "1", "--q-heads", "1", "--kv-heads", "1", "--context", "4"}, "--head-dim"},
		{"head dim 112", []string{"verify", "attention", "--batch", "1", "--q-heads", "1", "--kv-heads", "1", "--head-dim", "112", "--context", "4"}, "head_dim 112"},
		{"group not whole", []string{"verify", "attention", "--batch", "1", "--q-heads", "8", "--kv-heads", "3", "--head-dim", "64", "--context", "4"}, "kv_heads 3"},
		{"three lengths for two", with("--context", "1,2,3"), "3 lengths for a batch of 2"},
		{"context 0", with("--context", "5,0"), `"0"`},
		{"context not a number", with("--context", "5,x"), `"x"`},
		{"page size 48", with("--context", "5", "--page-size", "48"), "page size 48"},
		{"page size 8", with("--context", "5", "--page-size", "8"), "page size 8"},
		{"page size 512", with("--context", "5", "--page-size", "512"), "page size 512"},
		{"splits 2000", with("--context", "5", "--splits", "2000"), "--splits 2000"},
		{"negative splits", with("--context", "5", "--splits", "-1"), "--splits -1"},
		{"dtype f32", with("--context", "5", "--dtype", "f32"), `"f32"`},
		{"variant tensor", with("--context", "5", "--variant", "tensor"), `--variant: unknown attention variant "tensor" (want auto, simt, mma)`},
		{"negative scale", with("--context", "5", "--scale", "-2"), "scale -2"},
		{"negative window", with("--context", "5", "--window", "-3"), "--window -3"},
		{"negative chunk", with("--context", "5", "--chunk", "-1"), "--chunk -1"},
		{"window and chunk", with("--context", "5", "--window", "4", "--chunk", "8"), "--window 4 and --chunk 8"},
		{"batch 0", []string{"verify", "attention", "--batch", "0", "--q-heads", "1", "--kv-heads", "1", "--head-dim", "64", "--context", "4"}, "--batch 0"},
		{"too large for the reference", with("--context", "2000k"), "host reference"},
		{"stray argument", with("--context", "5", "extra"), `"extra"`},
		{"unknown backend", []string{"verify", "attention", "--batch", "1", "--q-heads", "1", "--kv-heads", "1", "--head-dim", "64", "--context", "4", "--backend", "rocm"}, `"rocm"`},
	}
	checkUsageErrors(t, cases)
}

// The fake library's attention writes nothing: the poisoned output must fail the check, as NaN.
func TestVerifyAttentionCatchesUnwrittenOutput(t *testing.T) {
	hermetic(t, cgotest.FakeLibrary(t, "libdecodebench_emu.so"))
	out, code, msg := runCLI(t, "verify", "attention", "--backend", "emu", "--json", "--batch", "1", "--q-heads", "2",
		"--kv-heads", "1", "--head-dim", "64", "--context", "9")
	if code != exitFailure || !strings.Contains(msg, "verify attention failed") {
		t.Fatalf("exit %d (%s), want %d", code, msg, exitFailure)
	}
	var rep attentionReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("a failed run's JSON does not parse (NaN?): %v\n%s", err, out)
	}
	if rep.Passed || rep.NonFinite != 2*64 || !strings.Contains(rep.Reason, "NaN") || rep.Worst.Index != 0 {
		t.Errorf("report: %s", out)
	}
	// Every output is NaN: no relative error is defined, and the report says so.
	if rep.RelError != nil || !strings.Contains(out, `"rel_error": null`) {
		t.Errorf("rel_error of an all-NaN output: %s", out)
	}
	text, _, _ := runCLI(t, "verify", "attention", "--backend", "emu", "--batch", "1", "--q-heads", "2",
		"--kv-heads", "1", "--head-dim", "64", "--context", "9")
	if !strings.Contains(text, "relative L2 error undefined: 128 output(s) NaN or infinite") {
		t.Errorf("text report of an all-NaN output:\n%s", text)
	}
}

func TestParseContextList(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
	}{
		{"7", []int{7}},
		{"5,5,1", []int{5, 5, 1}},
		{"300,1-4,2k", []int{300, 1, 2, 3, 4, 2048}},
	} {
		got, err := parseContextList(c.in)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("parseContextList(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	if got := describeContexts([]int{4, 4, 4}); got != "3 x 4" {
		t.Errorf("describeContexts = %q", got)
	}
	if got := describeContexts([]int{1, 2, 3, 4, 5, 6, 7, 8, 9}); got != "[1 2 3 4 5 6 ... 9] (9 sequences)" {
		t.Errorf("describeContexts = %q", got)
	}
}

// TestVerifyAttentionOnGPU runs the emulator matrix and model-sized shapes on a GPU where there
// is one (skipped otherwise, failed under DECODEBENCH_REQUIRE_GPU=1): real cp.async pipelines,
// the device's SM count in the auto splits, shared memory past 48 KiB.
func TestVerifyAttentionOnGPU(t *testing.T) {
	lib := cgotest.CUDA(t)
	hermetic(t, lib.Path())
	var runs [][]string
	for _, c := range attentionVariantMatrix() {
		args := c.args()
		args[3] = "cuda" // --backend
		runs = append(runs, args)
	}
	for _, extra := range [][]string{
		// Llama-3-8B layout (32 query heads, 8 KV heads, 128 dims), one long sequence, auto splits
		{"--batch", "1", "--q-heads", "32", "--kv-heads", "8", "--head-dim", "128", "--context", "32k", "--page-size", "16"},
		// Llama-3-70B layout, a ragged batch
		{"--batch", "4", "--q-heads", "64", "--kv-heads", "8", "--head-dim", "128", "--context", "8k,1,4097,100", "--append"},
		// a batch that fills the card without splits
		{"--batch", "64", "--q-heads", "28", "--kv-heads", "4", "--head-dim", "128", "--context", "1000", "--page-size", "64", "--dtype", "fp16"},
	} {
		runs = append(runs, append([]string{"verify", "attention", "--backend", "cuda", "--json"}, extra...))
	}
	for _, args := range runs {
		out, code, msg := runCLI(t, args...)
		if code != 0 {
			t.Errorf("%v: exit %d (%s)\n%s", args, code, msg, out)
		}
	}
}

// --kv-dtype fp8 verifies the attention over an fp8 e4m3 cache (the append quantising the new
// token); a 16-bit cache of another dtype than the activations, or an unknown one, is a usage
// error naming it.
func TestVerifyAttentionFP8Cache(t *testing.T) {
	for _, variant := range []string{"simt", "mma"} {
		stdout, code, msg := runCLI(t, "verify", "attention", "--backend", "emu", "--batch", "2", "--q-heads", "4", "--kv-heads", "1",
			"--head-dim", "64", "--context", "33,90", "--page-size", "16", "--kv-dtype", "fp8", "--append", "--splits", "2", "--variant", variant)
		if code != 0 || !strings.Contains(stdout, "fp8 e4m3 KV cache") || !strings.Contains(stdout, "PASS") {
			t.Errorf("%s: exit %d\n%s%s", variant, code, stdout, msg)
		}
	}
	for _, tc := range []struct{ kv, want string }{
		{"fp16", "--kv-dtype fp16 with --dtype bf16"}, {"int4", `--kv-dtype "int4": want bf16, fp16 or fp8`},
	} {
		_, code, msg := runCLI(t, "verify", "attention", "--backend", "emu", "--batch", "1", "--q-heads", "4", "--kv-heads", "1",
			"--head-dim", "64", "--context", "33", "--kv-dtype", tc.kv)
		if code != 2 || !strings.Contains(msg, tc.want) {
			t.Errorf("--kv-dtype %s: exit %d, %q; want 2 naming %q", tc.kv, code, msg, tc.want)
		}
	}
}

// --kv-scales: tensor (the default), or head for an fp8 cache only; a model's kv_cache_scheme
// "attn_head" implies head for its fp8 cache; anything else is a usage error naming the value.
func TestParseKVScales(t *testing.T) {
	fp8 := cgo.DTypeFP8E4M3
	for _, c := range []struct {
		name        string
		kv          cgo.DType
		modelScales string
		want, err   string
	}{
		{"", fp8, "", "", ""},
		{"", fp8, model.KVScalesHead, measure.KVScalesHead, ""},
		{"", 0, model.KVScalesHead, "", ""},
		{"tensor", fp8, model.KVScalesHead, "", ""},
		{"head", fp8, "", measure.KVScalesHead, ""},
		{"head", 0, "", "", "per-head scales are an fp8 cache's"},
		{"channel", fp8, "", "", `--kv-scales "channel": want tensor or head`},
	} {
		got, err := parseKVScales(c.name, c.kv, c.modelScales)
		if got != c.want || (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("parseKVScales(%q, %v, %q) = %q, %v; want %q, %q", c.name, c.kv, c.modelScales, got, err, c.want, c.err)
		}
	}
	_, code, msg := runCLI(t, "verify", "attention", "--backend", "emu", "--batch", "1", "--q-heads", "2", "--kv-heads", "1",
		"--head-dim", "64", "--context", "9", "--kv-scales", "head")
	if code != 2 || !strings.Contains(msg, "--kv-scales head") {
		t.Errorf("--kv-scales head on a bf16 cache: exit %d, %q; want 2 naming it", code, msg)
	}
}
