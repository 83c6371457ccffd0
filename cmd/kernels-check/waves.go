package main

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/cgo"
)

// Planner lists the launches of a call as the kernels library plans it (a *cgo.Device; a fake
// in tests).
type Planner interface {
	LinearLaunches(p cgo.LinearParams) ([]cgo.LaunchInfo, error)
	AttentionLaunches(p cgo.AttentionParams) ([]cgo.LaunchInfo, error)
}

// Call is one linear or attention call of a decode step whose launches the gate plans.
type Call struct {
	Model   string `json:"model"`
	Name    string `json:"call"` // model.Kernel's name: "qkv_proj", "attention", ...
	Kind    string `json:"kind"` // model.KindLinear or model.KindAttention
	Batch   int    `json:"batch"`
	N       int    `json:"n,omitempty"`
	K       int    `json:"k,omitempty"`
	Context int    `json:"context,omitempty"`
	QHeads  int    `json:"q_heads,omitempty"`
	KVHeads int    `json:"kv_heads,omitempty"`
	HeadDim int    `json:"head_dim,omitempty"`
	// Quantized linear calls: W's format (cgo.WeightDense for the activation dtype's) and its
	// group size.
	Weight cgo.WeightFormat `json:"weight_format,omitempty"`
	Group  int              `json:"group_size,omitempty"`
}

// WeightBytes is the bytes of a linear call's W in its format, scales and zero points included
// (bf16 for a dense one).
func (c Call) WeightBytes() int64 {
	if c.Weight == cgo.WeightDense {
		return 2 * int64(c.N) * int64(c.K)
	}
	return int64(c.Weight.Layout(c.N, c.K, c.Group).Bytes())
}

// QuantWave is one quantized weight format the wave rule holds the quantized linear kernels to.
type QuantWave struct {
	Weight cgo.WeightFormat
	Group  int
}

// QuantWaveFormats and QuantWaveBatches: the quantized linears of the wave models' decode steps
// (every projection, lm_head included) in fp8 with per-channel scales, int4 with groups of 128
// (GPTQ-style) and mxfp4, at batch 1 and 4 (the quantized GEMV), 16 (the tensor-core kernel's
// batch tile of 16), 64 and 256 (its tile of 32).
var (
	QuantWaveFormats = []QuantWave{{cgo.WeightFP8, 0}, {cgo.WeightINT4, 128}, {cgo.WeightMXFP4, 32}}
	QuantWaveBatches = []int{1, 4, 16, 64, 256}
)

// WaveModels and the batches and contexts the waves are planned at: the decode shapes of
// Llama-3-8B and -70B from batch 1 to 1024; attention at short and long contexts.
var (
	WaveModels            = []string{"llama3-8b", "llama3-70b"}
	WaveLinearBatches     = []int{1, 8, 16, 64, 256, 1024}
	WaveAttentionBatches  = []int{1, 16, 64, 256}
	WaveAttentionContexts = []int{512, 1024, 2048, 4096, 8192, 16384, 32768}
)

// StepCalls lists the distinct linear and attention calls of the models' decode steps at the
// wave batches and contexts.
func StepCalls() ([]Call, error) {
	var calls []Call
	for _, name := range WaveModels {
		s, err := model.Lookup(name)
		if err != nil {
			return nil, err
		}
		for _, b := range WaveLinearBatches {
			for _, k := range s.Kernels(b, 1) {
				if k.Kind == model.KindLinear {
					calls = append(calls, Call{Model: s.Name, Name: k.Name, Kind: k.Kind, Batch: k.M, N: k.N, K: k.K})
				}
			}
		}
		for _, b := range WaveAttentionBatches {
			for _, ctx := range WaveAttentionContexts {
				for _, k := range s.Kernels(b, ctx) {
					if k.Kind == model.KindAttention {
						calls = append(calls, Call{Model: s.Name, Name: k.Name, Kind: k.Kind, Batch: k.Batch,
							Context: k.Context, QHeads: k.QHeads, KVHeads: k.KVHeads, HeadDim: k.HeadDim})
					}
				}
			}
		}
		for _, q := range QuantWaveFormats {
			for _, b := range QuantWaveBatches {
				for _, k := range s.Kernels(b, 1) {
					if k.Kind == model.KindLinear {
						calls = append(calls, Call{Model: s.Name, Name: k.Name, Kind: k.Kind, Batch: k.M, N: k.N, K: k.K,
							Weight: q.Weight, Group: q.Group})
					}
				}
			}
		}
	}
	return calls, nil
}

// Wave is one launch of one call, with its residency and waves on the card.
type Wave struct {
	Call
	Launch       int    `json:"launch"` // 0-based position among the call's launches
	Kernel       string `json:"kernel"`
	Blocks       int64  `json:"blocks"`
	BlockThreads int    `json:"block_threads"`
	Smem         int    `json:"smem"`
	Registers    int    `json:"registers"`
	BlocksPerSM  int    `json:"blocks_per_sm"`
	WarpsPerSM   int    `json:"warps_per_sm"`
	// Waves is Blocks / (BlocksPerSM x SMs); LastWave is how full the last wave is (1 when the
	// launch is whole waves): 1.08 waves leave the card 54% idle for the last one.
	Waves    float64 `json:"waves"`
	LastWave float64 `json:"last_wave"`
	// Units is the work units the blocks share (a grid-stride kernel's; else one a block), and
	// Fill how well they fill the card (WaveFill); Rule is the wave rule's verdict (WaveRule).
	Units int64   `json:"units"`
	Fill  float64 `json:"fill"`
	// Attention: the launch's KV splits (grid y), and the best fill any split count of whole
	// tiles could give the call (BestAttentionFill), which the wave rule holds it to.
	Splits   int     `json:"splits,omitempty"`
	BestFill float64 `json:"best_fill,omitempty"`
	Rule     string  `json:"rule,omitempty"`
	Error    string  `json:"error,omitempty"`
}

// The wave rule. Every main launch of a linear call (launch 0: the GEMV, MMA or tiled kernel;
// for quantized weights the quantized GEMV or tensor-core kernel)
// must fill at least WholeWaves of the card, Fill = units / (ceil(units / blocks) x
// ceil(blocks / slots) x slots) with slots = blocks per SM (ptxas's figures) x SMs: the share of
// the launch's block-time that does work when every block takes as long as the busiest. 0.9
// allows a tenth of the card idle in the last round, about what a launch's own start costs
// (2-3 us) beside the 20-30 us of an 8B layer's linear at batch 1; a looser rule (two full
// waves, say) passes 1.5 waves, which leave a quarter idle. Exempt:
//   - calls whose weights (in their format: a quantized W with its scales and zero points) are
//     under SmallWeightBytes: at ~4.8 TB/s 8 MiB stream in 1.7 us,
//     less than a launch costs, so they are bound by latency, not by how they fill the SMs
//     (routers, the smallest presets' projections);
//   - the split-K / stream-K reduce (launch 1): it reads only the partials of the split tiles
//     (a few MB at the decode shapes) and costs about one launch.
//
// The attention launch of every call (batch 1-256, contexts 512-32k) must fill WholeWaves too
// wherever some split count could: the planner (kernels/attention.cu, attn_auto_splits) cuts a
// sequence into splits of whole tiles, s = ceil(tiles / k), so where no such s reaches 0.9
// (too few tiles for a wave: batch 1 at 512-1k; or whole tiles that land between waves: 43
// splits fill 0.87 of 396 slots, 52 spill into a second wave) the launch is exempt, and the
// table says so with the best fill whole tiles allow.
//
// The planners (kernels/linear.cu, kWholeWaves and kSmallWeightBytes) aim at the same figure
// with the emulator's register table; blocks per SM here come from ptxas, so a stale table
// fails this rule too.
const (
	WholeWaves       = 0.9
	SmallWeightBytes = 8 << 20
	RuleOK           = "ok"
	RuleFail         = "FAIL"
)

// WaveFill is the share of a launch's block-time that does work: units equal units shared by
// blocks blocks (each takes units b, b + blocks, ...) on slots resident blocks.
func WaveFill(units, blocks int64, slots int) float64 {
	if units <= 0 || blocks <= 0 || slots <= 0 {
		return 0
	}
	ceil := func(a, b int64) int64 { return (a + b - 1) / b }
	return float64(units) / (float64(ceil(units, blocks)) * float64(ceil(blocks, int64(slots))) * float64(slots))
}

// WaveRule gives the wave rule's verdict on w: RuleOK, RuleFail, or "exempt: why".
func WaveRule(w Wave) string {
	if w.Kind == model.KindAttention {
		switch {
		case w.Error != "":
			return RuleFail
		case w.Fill >= WholeWaves:
			return RuleOK
		case w.BestFill < WholeWaves:
			return fmt.Sprintf("exempt: whole tiles fill at most %.0f%%", 100*w.BestFill)
		}
		return RuleFail
	}
	switch {
	case w.Kind != model.KindLinear:
		return ""
	case w.Error != "":
		return RuleFail
	case w.Launch > 0:
		return "exempt: reduce"
	case w.WeightBytes() < SmallWeightBytes:
		return "exempt: small W"
	case w.Fill < WholeWaves:
		return RuleFail
	}
	return RuleOK
}

// AttentionTile is the tokens a tile of the decode kernel that an automatic attention plan
// launches (SIMT, attention_kernels.cuh AttnConfig::kTile): 64 up to head dim 64, 32 up to 128,
// 16 above. kernels/attention_plan_test.cpp checks the plans' splits against the same tiles.
func AttentionTile(headDim int) int {
	switch {
	case headDim <= 64:
		return 64
	case headDim <= 128:
		return 32
	}
	return 16
}

// BestAttentionFill is the best fill (WaveFill, one unit a block) that any split count of whole
// tiles gives a launch of perSplit blocks a split over tiles tiles on slots resident blocks:
// s = ceil(tiles / k) splits for k = 1..tiles, at most cgo.MaxSplits.
func BestAttentionFill(perSplit int64, tiles int, slots int) float64 {
	best := 0.0
	for k := 1; k <= tiles; k++ {
		s := int64((tiles + k - 1) / k)
		if s > int64(cgo.MaxSplits) {
			continue
		}
		best = math.Max(best, WaveFill(perSplit*s, perSplit*s, slots))
	}
	return best
}

// shortKernel is a kernel's name without its namespace and template arguments.
func shortKernel(name string) string {
	name = strings.TrimPrefix(name, "(anonymous namespace)::")
	if i := strings.Index(name, "<"); i >= 0 {
		name = name[:i]
	}
	return name
}

// Fake device addresses for planning: planners check they are non-zero and aligned, and read
// nothing.
const (
	fakeBase  = uint64(1) << 40
	fakeAlign = uint64(1) << 30
)

func fakeAddress(i int) uint64 { return fakeBase + uint64(i)*fakeAlign }

// PlanWaves plans every call with planner and computes the waves of each launch on an SM count
// of sms, with each kernel's registers from k. A call the planner rejects is a row with its
// error; a planner without the launch-listing function stops the whole section (errors.Is
// cgo.ErrNotExported).
func PlanWaves(planner Planner, calls []Call, k *Kernels, limits SMLimits, sms int) ([]Wave, error) {
	var waves []Wave
	for _, c := range calls {
		var (
			launches []cgo.LaunchInfo
			err      error
		)
		switch c.Kind {
		case model.KindLinear:
			p := cgo.LinearParams{
				X: fakeAddress(0), W: fakeAddress(1), Y: fakeAddress(2),
				Batch: c.Batch, N: c.N, K: c.K, DType: cgo.DTypeBF16, Variant: cgo.LinearAuto,
			}
			if c.Weight != cgo.WeightDense {
				p.WeightFormat, p.GroupSize, p.Scales = c.Weight, c.Group, fakeAddress(3)
				if c.Weight == cgo.WeightINT4ZeroPt {
					p.Zeros = fakeAddress(4)
				}
			}
			launches, err = planner.LinearLaunches(p)
		case model.KindAttention:
			launches, err = planner.AttentionLaunches(cgo.AttentionParams{
				Q: fakeAddress(0), Out: fakeAddress(1), ContextLens: fakeAddress(2),
				Cache: cgo.KVCache{K: fakeAddress(3), V: fakeAddress(4), Layout: cgo.KVContiguous, DType: cgo.DTypeBF16,
					KVHeads: c.KVHeads, HeadDim: c.HeadDim, Capacity: c.Context},
				Batch: c.Batch, QHeads: c.QHeads, MaxContext: c.Context,
			})
		default:
			err = fmt.Errorf("unknown call kind %q", c.Kind)
		}
		if errors.Is(err, cgo.ErrNotExported) {
			return waves, err
		}
		if err != nil {
			w := Wave{Call: c, Launch: -1, Error: err.Error()}
			w.Rule = WaveRule(w)
			waves = append(waves, w)
			continue
		}
		for i, l := range launches {
			w := waveOf(c, i, l, k, limits, sms)
			w.Rule = WaveRule(w)
			waves = append(waves, w)
		}
	}
	return waves, nil
}

func waveOf(c Call, i int, l cgo.LaunchInfo, k *Kernels, limits SMLimits, sms int) Wave {
	w := Wave{Call: c, Launch: i, Kernel: l.Kernel, Blocks: l.Blocks(), Units: l.Units(), BlockThreads: l.BlockThreads, Smem: l.SmemBytes}
	res, ok := k.Resources(l.Kernel)
	if !ok {
		w.Error = fmt.Sprintf("ptxas reported nothing for %q (db_launch_info.kernel must be the demangled name)", l.Kernel)
		return w
	}
	w.Registers = res.Registers
	// Static shared memory (ptxas's) and the launch's dynamic shared memory both bound residency.
	occ, err := limits.Occupancy(res.Registers, l.BlockThreads, res.SmemBytes+l.SmemBytes)
	if err != nil {
		w.Error = err.Error()
		return w
	}
	w.BlocksPerSM, w.WarpsPerSM = occ.BlocksPerSM, occ.WarpsPerSM
	if occ.BlocksPerSM < 1 || sms < 1 {
		w.Error = "no block fits an SM"
		return w
	}
	w.Waves, w.LastWave = Waves(w.Blocks, occ.BlocksPerSM*sms)
	w.Fill = WaveFill(w.Units, w.Blocks, occ.BlocksPerSM*sms)
	if c.Kind == model.KindAttention {
		w.Splits = l.GridY
		tile := AttentionTile(c.HeadDim)
		w.BestFill = BestAttentionFill(int64(l.GridX)*int64(max(l.GridZ, 1)), (c.Context+tile-1)/tile, occ.BlocksPerSM*sms)
	}
	return w
}

// Waves is how many rounds blocks take on a card holding perWave at once, and how full the
// last round is.
func Waves(blocks int64, perWave int) (waves, lastWave float64) {
	if blocks <= 0 || perWave <= 0 {
		return 0, 0
	}
	waves = float64(blocks) / float64(perWave)
	full := math.Ceil(waves) - 1
	return waves, float64(blocks-int64(full)*int64(perWave)) / float64(perWave)
}
