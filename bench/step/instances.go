package step

import (
	"fmt"
	"slices"
)

// instance names the kernel code an op's planned call runs: its entry point, and for the calls
// with a plan the variant, format and head dim that pick a template instance and whether it
// splits (a split adds the partials' combine). Sizes that change only the grid are left out.
func instance(o Op) string {
	switch {
	case o.Linear != nil:
		l := o.Linear
		return fmt.Sprintf("linear %v %s split=%v", l.Variant, formatName(l.WeightFormat, l.GroupSize), l.SplitK > 1)
	case o.Attention != nil:
		a := o.Attention
		return fmt.Sprintf("attention %v head_dim=%d kv=%v split=%v window=%v chunk=%v sinks=%v", a.Variant, a.Cache.HeadDim, a.Cache.DType,
			a.NumSplits > 1, a.Window > 0, a.Chunk > 0, a.Sinks != 0)
	case o.MLAAttention != nil:
		return fmt.Sprintf("attention_mla split=%v", o.MLAAttention.NumSplits > 1)
	case o.Argmax != nil:
		return fmt.Sprintf("argmax split=%v", o.Argmax.NumSplits > 1)
	case o.GroupedLinear != nil:
		return fmt.Sprintf("grouped_linear %s", formatName(o.GroupedLinear.Format, o.GroupedLinear.GroupSize))
	}
	return o.Kernel()
}

// instances plans p's calls on pl (no memory touched) and gives the kernel instances they run.
func (p *Program) instances(pl Planner) (map[string]bool, error) {
	out := map[string]bool{}
	ops := p.Ops(func(string) uint64 { return planAddress })
	for i := range ops {
		if _, err := ops[i].Plan(pl, 0, 0); err != nil {
			return nil, err
		}
		out[instance(ops[i])] = true
	}
	return out, nil
}

// uncovered lists the kernel instances full's step runs that checked's does not, sorted.
func uncovered(pl Planner, full, checked *Program) ([]string, error) {
	want, err := full.instances(pl)
	if err != nil {
		return nil, err
	}
	have, err := checked.instances(pl)
	if err != nil {
		return nil, err
	}
	var out []string
	for k := range want {
		if !have[k] {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out, nil
}
