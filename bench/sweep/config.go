// Package sweep measures decode steps over batch, context and model axes and keeps the results
// in a run directory.
//
// A configuration (model, batch B, context S) is one decode step. Its distinct kernels
// (model.Shape.Kernels) are measured on the device, each shape once however many
// configurations share it (the linear layers do not depend on the context, so a batch's
// linears serve every context), and the step time is composed from them:
//
//	step = Σ kernels Repeat x median time  +  Σ small per-token ops  bytes / measured read bandwidth
//
// The small ops (norms, residual adds, rotary, KV append, activation, embedding gather,
// sampling) are not launched: each is bounded below by its bytes over the read bandwidth the
// probes measured, and the record says so. per-request tokens/s = 1 / step; per-server = B /
// step, and both are held against the roofline bound of bench/roofline with the datasheet and
// the measured ceilings.
//
// The run directory holds run.json (the card, the method, the axes, the ceilings), one JSON
// line per configuration in results.jsonl and one per kernel measurement in kernels.jsonl, each
// appended and synced as soon as it is known: an interrupted sweep loses at most the
// measurement in flight, and a resumed one repeats no configuration and no kernel.
package sweep

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/cgo"
)

// KernelDTypes are the weight and KV dtypes the kernels take.
var KernelDTypes = []model.DType{model.BF16, model.FP16}

// Axes are the values a sweep crosses: every model with every batch and every context.
type Axes struct {
	Models   []model.Shape `json:"models"`
	Batches  []int         `json:"batches"`
	Contexts []int         `json:"contexts"`
}

// Config is one decode step to measure.
type Config struct {
	Model   model.Shape
	Batch   int
	Context int
}

// Key identifies a configuration in results.jsonl: "model=<ModelKey> batch=8 context=4096".
func (c Config) Key() string {
	return fmt.Sprintf("model=%s batch=%d context=%d", ModelKey(c.Model), c.Batch, c.Context)
}

// ModelKey names a shape by everything that decides its kernels: two shapes with one key
// measure the same. It is the Name when the shape is a preset or a config.json, followed by the
// dimensions, so that a custom shape and a renamed preset cannot collide.
func ModelKey(s model.Shape) string {
	name := strings.ReplaceAll(s.Name, " ", "_")
	if name == "" {
		name = "custom"
	}
	key := fmt.Sprintf("%s:h%d-f%d-l%d-q%d-kv%d-d%d-v%d-%s-%s", name, s.Hidden, s.FFN, s.Layers, s.QHeads, s.KVHeads,
		s.HeadDim, s.Vocab, s.WeightDType, s.KVDType)
	if s.IsMoE() {
		key += fmt.Sprintf("-e%dx%dk%d", s.Experts, s.ExpertFFN, s.ExpertsPerToken)
	}
	if s.TP > 1 {
		key += fmt.Sprintf("-tp%d", s.TP)
	}
	if !s.GatedMLP {
		key += "-ungated"
	}
	if q := s.Quant; q != nil { // the format of the projections: --weight-dtype's axis
		key += fmt.Sprintf("-q%s%d", q.Method, q.Bits)
		for _, part := range []struct {
			on   bool
			text string
		}{{q.GroupSize > 0, fmt.Sprintf("g%d", q.GroupSize)}, {q.BlockN > 0, fmt.Sprintf("b%dx%d", q.BlockN, q.BlockK)},
			{q.PerTensor, "t"}, {q.Zeros, "z"}, {q.GIdx, "gidx"}, {q.AttentionKept, "attnkept"}} {
			if part.on {
				key += part.text
			}
		}
	}
	return key
}

// Validate checks the axes against the kernels' limits without touching a device: every model
// valid and of a dtype the kernels take, every kernel shape of every configuration one the
// kernels accept. Errors name the axis and the value.
func (a Axes) Validate() error {
	switch {
	case len(a.Models) == 0:
		return fmt.Errorf("no model to sweep")
	case len(a.Batches) == 0:
		return fmt.Errorf("no batch size to sweep")
	case len(a.Contexts) == 0:
		return fmt.Errorf("no context length to sweep")
	}
	for _, b := range a.Batches {
		if b < 1 || b > cgo.MaxBatch {
			return fmt.Errorf("batch %d: the kernels take a batch of 1..%d", b, cgo.MaxBatch)
		}
	}
	for _, c := range a.Contexts {
		if c < 1 {
			return fmt.Errorf("context %d: a decode step attends to at least one cached token", c)
		}
	}
	seen := map[string]bool{}
	for _, m := range a.Models {
		if err := m.Validate(); err != nil {
			return err
		}
		key := ModelKey(m)
		if seen[key] {
			return fmt.Errorf("model %s appears twice in the sweep", key)
		}
		seen[key] = true
		// fp8 and int8 weights: the quantized linears' per-channel formats (ref.WeightFormatOf)
		if !slices.Contains(KernelDTypes, m.WeightDType) && m.WeightDType != model.FP8 && m.WeightDType != model.INT8 {
			return fmt.Errorf("model %s: weight dtype %s: the kernels take bf16, fp16, fp8 or int8", m, m.WeightDType)
		}
		if !slices.Contains(KernelDTypes, m.KVDType) && (m.KVDType != model.FP8 || m.IsMLA()) {
			return fmt.Errorf("model %s: KV dtype %s: the kernels take bf16 or fp16 (and an fp8 cache for grouped-query attention)", m, m.KVDType)
		}
		if !m.IsMLA() && !cgo.IsAttentionHeadDim(m.HeadDim) {
			return fmt.Errorf("model %s: head dim %d: the attention kernels are built for %v", m, m.HeadDim, cgo.AttentionHeadDims)
		}
		// The largest batch has the largest M of every linear; K does not depend on the batch.
		for _, k := range m.Kernels(a.Batches[len(a.Batches)-1], a.Contexts[0]) {
			if k.Kind == model.KindLinear && k.K%cgo.LinearKMultiple != 0 {
				return fmt.Errorf("model %s: %s has K = %d input features: the linear kernels take a multiple of %d", m, k.Name, k.K, cgo.LinearKMultiple)
			}
		}
	}
	return nil
}

// Configs lists every configuration, coarse to fine: the corners of the batch x context grid
// (of each model) first, then the midpoints, then the points between, and so on (see
// Priority). A sweep that stops early, or that a budget trims from the end, still spans the
// whole range of each axis.
func (a Axes) Configs() []Config {
	type ranked struct {
		c        Config
		priority [2]int
		order    int
	}
	var all []ranked
	bLevels, cLevels, mLevels := bisectionLevels(len(a.Batches)), bisectionLevels(len(a.Contexts)), bisectionLevels(len(a.Models))
	for mi, m := range a.Models {
		for ci, ctx := range a.Contexts {
			for bi, b := range a.Batches {
				lv := []int{bLevels[bi], cLevels[ci], mLevels[mi]}
				all = append(all, ranked{
					c:        Config{Model: m, Batch: b, Context: ctx},
					priority: [2]int{slices.Max(lv), lv[0] + lv[1] + lv[2]},
					order:    len(all),
				})
			}
		}
	}
	slices.SortStableFunc(all, func(x, y ranked) int {
		if c := cmp.Compare(x.priority[0], y.priority[0]); c != 0 {
			return c
		}
		if c := cmp.Compare(x.priority[1], y.priority[1]); c != 0 {
			return c
		}
		return cmp.Compare(x.order, y.order)
	})
	out := make([]Config, len(all))
	for i, r := range all {
		out[i] = r.c
	}
	return out
}

// bisectionLevels gives each of n sorted values its level in a coarse-to-fine order: both ends
// are level 0, the middle level 1, the quarter points level 2, and so on.
func bisectionLevels(n int) []int {
	levels := make([]int, n)
	if n <= 2 {
		return levels
	}
	var split func(lo, hi, level int)
	split = func(lo, hi, level int) {
		if hi-lo < 2 {
			return
		}
		mid := (lo + hi) / 2
		levels[mid] = level
		split(lo, mid, level+1)
		split(mid, hi, level+1)
	}
	split(0, n-1, 1)
	return levels
}
