package measure

import (
	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
)

// runMoE routes, groups and combines, checking each step's outputs.
func (v *smallOpRun) runMoE() error {
	s, d, batch, hidden := v.s, v.d, v.s.Batch, v.s.Hidden
	dev := v.bufs.dev
	experts, topK, mode := s.Experts, s.TopK, ref.MoERouting(s.Routing)
	slots := batch * max(topK, 0)
	logits, lv, err := v.filled("the router logits", d, batch*experts)
	if err != nil {
		return err
	}
	ids, err := v.alloc("the top-k ids", 4*max(slots, 1))
	if err != nil {
		return err
	}
	weights, err := v.alloc("the top-k weights", 4*max(slots, 1))
	if err != nil {
		return err
	}
	if err := dev.MoERoute(cgo.MoERouteParams{Logits: logits.Ptr, TopKIDs: ids.Ptr, TopKWeights: weights.Ptr, Batch: batch, Experts: experts,
		TopK: topK, Mode: s.Routing, Renormalize: s.Renormalize, DType: s.DType}); err != nil {
		return err
	}
	wantIDs, wantW, boundW := ref.MoERoute(lv, experts, topK, mode, s.Renormalize)
	v.check("route ids", v.readInts(ids, slots), widenInts(wantIDs), nil)
	v.check("route weights", v.readFloats(weights, ref.F32, slots), wantW, boundW)
	counts, err := v.alloc("the expert counts", 4*experts)
	if err != nil {
		return err
	}
	offsets, err := v.alloc("the expert offsets", 4*(experts+1))
	if err != nil {
		return err
	}
	sorted, err := v.alloc("the sorted slots", 4*slots)
	if err != nil {
		return err
	}
	rows, err := v.alloc("the slot rows", 4*slots)
	if err != nil {
		return err
	}
	if err := dev.MoEGroup(cgo.MoEGroupParams{TopKIDs: ids.Ptr, ExpertCounts: counts.Ptr, ExpertOffsets: offsets.Ptr, SortedSlots: sorted.Ptr,
		SlotRows: rows.Ptr, Batch: batch, TopK: topK, Experts: experts}); err != nil {
		return err
	}
	g := ref.MoEGroup(wantIDs, experts)
	v.check("group counts", v.readInts(counts, experts), widenInts(g.Counts), nil)
	v.check("group offsets", v.readInts(offsets, experts+1), widenInts(g.Offsets), nil)
	v.check("group sorted slots", v.readInts(sorted, slots), widenInts(g.SortedSlots), nil)
	v.check("group slot rows", v.readInts(rows, slots), widenInts(g.SlotRows), nil)
	y, yv, err := v.filled("the experts' outputs", d, slots*hidden)
	if err != nil {
		return err
	}
	out, err := v.alloc("the output", batch*hidden*d.Bytes())
	if err != nil {
		return err
	}
	if err := dev.MoECombine(cgo.MoECombineParams{YSorted: y.Ptr, SlotRows: rows.Ptr, TopKWeights: weights.Ptr, Out: out.Ptr, Batch: batch,
		TopK: topK, Hidden: hidden, DType: s.DType}); err != nil {
		return err
	}
	want, bounds := ref.MoECombine(d, yv, g.SlotRows, v.readFloats(weights, ref.F32, slots), topK, hidden)
	v.check("combine", v.readFloats(out, d, batch*hidden), want, bounds)
	return nil
}
