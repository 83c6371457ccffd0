package cgo

// A whole decode step: CUDA graphs of the context's stream, device-side counters and the
// experts' grouped linear (the optional functions at the end of kernels/decodebench.h). A
// library without one answers ErrNotExported, naming it.

/*
#include "shim.h"
*/
import "C"

// Graph is a captured sequence of calls on one device's stream, replayed by Launch.
type Graph struct {
	d *Device
	g *C.db_graph
}

// BeginGraph starts capturing the device's stream: until EndGraph, calls that launch work are
// recorded, not run, and calls that wait for the device or copy to or from the host fail.
func (d *Device) BeginGraph() error {
	const op = "db_graph_begin"
	return d.Do(func() error {
		if err := d.check(op, C.dbshim_graph_begin(d.lib.api, d.ctx)); err != nil {
			return err
		}
		d.capturing = true
		return nil
	})
}

// abandonCapture ends an open capture and frees what it recorded (Close, on the device thread).
func (d *Device) abandonCapture() {
	d.capturing = false
	var g *C.db_graph
	if C.dbshim_graph_end(d.lib.api, d.ctx, &g) == C.DB_OK && g != nil {
		C.dbshim_graph_destroy(d.lib.api, d.ctx, g)
	}
}

// EndGraph ends the capture BeginGraph started and instantiates what it recorded.
func (d *Device) EndGraph() (*Graph, error) {
	const op = "db_graph_end"
	g := &Graph{d: d}
	err := d.Do(func() error {
		d.capturing = false
		return d.check(op, C.dbshim_graph_end(d.lib.api, d.ctx, &g.g))
	})
	if err != nil {
		return nil, err
	}
	return g, nil
}

// Launch replays the graph on the device's stream without waiting for it.
func (g *Graph) Launch() error {
	const op = "db_graph_launch"
	if g == nil || g.g == nil {
		return argError(op, "the graph is closed")
	}
	return g.d.Do(func() error { return g.d.check(op, C.dbshim_graph_launch(g.d.lib.api, g.d.ctx, g.g)) })
}

// Close frees the graph; a closed graph cannot be launched. Closing twice is a no-op.
func (g *Graph) Close() error {
	const op = "db_graph_destroy"
	if g == nil || g.g == nil {
		return nil
	}
	err := g.d.Do(func() error { return g.d.check(op, C.dbshim_graph_destroy(g.d.lib.api, g.d.ctx, g.g)) })
	g.g = nil
	return err
}

// AddInt32 adds delta to each of the count int32s at dptr, on the device's stream.
func (d *Device) AddInt32(dptr uint64, count, delta int) error {
	const op = "db_add_i32"
	c, err := toInt32(op, "count", count)
	if err != nil {
		return err
	}
	dl, err := toInt32(op, "delta", delta)
	if err != nil {
		return err
	}
	return d.Do(func() error { return d.check(op, C.dbshim_add_i32(d.lib.api, d.ctx, C.uint64_t(dptr), c, dl)) })
}

// GroupedLinearParams mirrors db_grouped_linear_params: for each expert e and each row r in
// [ExpertOffsets[e], ExpertOffsets[e+1]), Y[r] = X[r]·W_e^T (+ Bias_e). With ExpertOffsets 0
// the call is Experts groups of Rows rows each (MLA's per-head absorbed projections): row r of
// group g at X + r*XRowStride + g*XGroupStride elements, and likewise in Y. Strides are in
// elements, 0 for the dense layout (row strides K and N, group strides Rows*K and Rows*N).
type GroupedLinearParams struct {
	X, W, Bias, Y uint64 // [Rows x K], [Experts x N x K], [Experts x N] or 0, [Rows x N]
	ExpertOffsets uint64 // int32 [Experts + 1], as MoEGroup writes it; 0: uniform groups
	Rows, Experts int
	N, K          int
	DType         DType

	XRowStride, XGroupStride int
	YRowStride, YGroupStride int

	// Quantized experts (all zero for dense weights of DType): W, Scales and Zeros hold Experts
	// matrices of Format's Layout(N, K, GroupSize) each, expert e's at e times that layout's
	// WBytes, ScaleBytes and ZeroBytes from the base. They run on the CUDA-core kernel.
	Scales, Zeros uint64
	Format        WeightFormat
	GroupSize     int
}

// GroupedLinear runs every expert's linear over the rows routed to it.
func (d *Device) GroupedLinear(p GroupedLinearParams) error {
	const op = "db_grouped_linear"
	var c C.db_grouped_linear_params
	var err error
	c.x, c.w, c.bias, c.y = C.uint64_t(p.X), C.uint64_t(p.W), C.uint64_t(p.Bias), C.uint64_t(p.Y)
	c.expert_offsets, c.dtype = C.uint64_t(p.ExpertOffsets), C.int32_t(p.DType)
	if err := int32s(op, "rows", p.Rows, &c.rows, "experts", p.Experts, &c.experts, "n", p.N, &c.n, "k", p.K, &c.k); err != nil {
		return err
	}
	c.x_row_stride, c.x_group_stride = C.int64_t(p.XRowStride), C.int64_t(p.XGroupStride)
	c.y_row_stride, c.y_group_stride = C.int64_t(p.YRowStride), C.int64_t(p.YGroupStride)
	c.scales, c.zeros, c.weight_format = C.uint64_t(p.Scales), C.uint64_t(p.Zeros), C.int32_t(p.Format)
	if c.group_size, err = toInt32(op, "group_size", p.GroupSize); err != nil {
		return err
	}
	return d.Do(func() error { return d.check(op, C.dbshim_grouped_linear(d.lib.api, d.ctx, &c)) })
}
