package cgo_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

// Graphs on the emulator: what a capture refuses, the errors of misuse, a replay's failure
// naming its kernel, and a chain of a decode step's real calls that, captured once and replayed
// five times, gives bit for bit what the same chain gives run eagerly five times.

func mustGraph(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantErr(t *testing.T, what string, err error, contains string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), contains) {
		t.Errorf("%s: got %v, want an error containing %q", what, err, contains)
	}
}

func TestGraphCaptureRefusesHostCalls(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	buf := mustAlloc(t, dev, 256)
	timer, err := dev.NewTimer()
	mustGraph(t, err)
	defer timer.Close()
	wantErr(t, "EndGraph before BeginGraph", func() error { _, err := dev.EndGraph(); return err }(), "not capturing a graph")

	const seven = 0x07070707
	mustGraph(t, buf.Memset(0))
	mustGraph(t, dev.BeginGraph())
	wantErr(t, "BeginGraph twice", dev.BeginGraph(), "already capturing a graph")
	const refused = "not allowed while the context is capturing a graph"
	_, err = dev.Alloc(64)
	wantErr(t, "Alloc", err, "db_buffer_alloc: "+refused)
	wantErr(t, "Synchronize", dev.Synchronize(), "db_synchronize: "+refused)
	wantErr(t, "CopyToHost", buf.CopyToHost(make([]byte, 16)), "db_copy_to_host: "+refused)
	wantErr(t, "CopyFromHost", buf.CopyFromHost(make([]byte, 16)), "db_copy_to_device: "+refused)
	wantErr(t, "timer Start", timer.Start(), "db_timer_start: "+refused)
	_, err = dev.NewTimer()
	wantErr(t, "NewTimer", err, "db_timer_create: "+refused)
	// What launches work is captured, not run: the buffer keeps its bytes until the replay.
	mustGraph(t, buf.Memset(7))
	mustGraph(t, dev.AddInt32(buf.Ptr, 4, 5))
	g, err := dev.EndGraph()
	mustGraph(t, err)
	defer g.Close()
	wantErr(t, "EndGraph twice", func() error { _, err := dev.EndGraph(); return err }(), "not capturing a graph")
	if got := soReadInts(t, buf, 1); got[0] != 0 {
		t.Fatalf("the capture ran its calls: the buffer holds %#x, want the 0 from before it", got[0])
	}
	mustGraph(t, g.Launch())
	mustGraph(t, g.Launch())
	got := soReadInts(t, buf, 5)
	if got[0] != seven+5 || got[3] != seven+5 || got[4] != seven {
		t.Fatalf("after two replays of memset(7), add 5 to 4: %#x", got)
	}
	// The device is usable as ever after the capture.
	mustGraph(t, dev.Synchronize())
	b2, err := dev.Alloc(64)
	mustGraph(t, err)
	b2.Close()
}

func TestGraphMisuseIsAnError(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	buf := mustAlloc(t, dev, 64)
	mustGraph(t, dev.BeginGraph())
	mustGraph(t, dev.AddInt32(buf.Ptr, 1, 1))
	g, err := dev.EndGraph()
	mustGraph(t, err)
	stale := *g // the same handle, kept past Close
	mustGraph(t, g.Close())
	mustGraph(t, g.Close()) // twice: a no-op
	wantErr(t, "Launch after Close", g.Launch(), "closed")
	wantErr(t, "Launch of a destroyed graph", stale.Launch(), "not a live graph")
	wantErr(t, "Close of a destroyed graph", stale.Close(), "not a live graph")

	// Launching into a capture.
	mustGraph(t, dev.BeginGraph())
	g2, err := dev.EndGraph()
	mustGraph(t, err)
	defer g2.Close()
	mustGraph(t, dev.BeginGraph())
	wantErr(t, "Launch while capturing", g2.Launch(), "is capturing a graph")
	g3, err := dev.EndGraph()
	mustGraph(t, err)
	mustGraph(t, g3.Close())
	mustGraph(t, g2.Launch()) // an empty graph replays nothing

	// A device closed mid-capture drops the capture and still frees its buffers.
	lib := cgotest.Emu(t)
	before, err := lib.DeviceProps(0)
	mustGraph(t, err)
	dev2, err := lib.OpenDevice(0)
	mustGraph(t, err)
	if _, err := dev2.Alloc(64 << 20); err != nil {
		t.Fatal(err)
	}
	mustGraph(t, dev2.BeginGraph())
	mustGraph(t, dev2.AddInt32(buf.Ptr, 1, 1))
	mustGraph(t, dev2.Close())
	after, err := lib.DeviceProps(0)
	mustGraph(t, err)
	if after.MemFreeBytes < before.MemFreeBytes {
		t.Errorf("closing a device mid-capture leaked %d bytes", before.MemFreeBytes-after.MemFreeBytes)
	}

}

func TestGraphReplayFailureNamesTheKernel(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	buf, err := dev.Alloc(4096)
	mustGraph(t, err)
	keep := mustAlloc(t, dev, 64)
	mustGraph(t, dev.BeginGraph())
	mustGraph(t, keep.Memset(0))
	mustGraph(t, dev.AddInt32(buf.Ptr, 1024, 1))
	g, err := dev.EndGraph()
	mustGraph(t, err)
	defer g.Close()
	mustGraph(t, g.Launch())
	mustGraph(t, buf.Close()) // the graph now points at freed memory
	err = g.Launch()
	wantErr(t, "replay after a free", err, "graph replay, record 2 of 2 (add_i32_kernel)")
	if !errors.Is(err, cgo.StatusLaunch) {
		t.Errorf("replay after a free: %v does not match StatusLaunch", err)
	}

	mb, err := dev.Alloc(256)
	mustGraph(t, err)
	mustGraph(t, dev.BeginGraph())
	mustGraph(t, mb.Memset(1))
	gm, err := dev.EndGraph()
	mustGraph(t, err)
	defer gm.Close()
	mustGraph(t, mb.Close())
	wantErr(t, "memset replay after a free", gm.Launch(), "record 1 of 1 (cudaMemsetAsync): its 256 bytes are no longer inside a live allocation")
}

func TestAddInt32(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	v := make([]int32, 1030)
	for i := range v {
		v[i] = int32(i) - 500
	}
	buf := soInts(t, dev, v)
	mustGraph(t, dev.AddInt32(buf.Ptr, 1029, -3))
	got := soReadInts(t, buf, len(v))
	for i := range v {
		want := v[i] - 3
		if i == 1029 {
			want = v[i] // past count: untouched
		}
		if got[i] != want {
			t.Fatalf("element %d: %d, want %d", i, got[i], want)
		}
	}
	mustGraph(t, dev.AddInt32(buf.Ptr, 0, 9)) // nothing to do
	wantErr(t, "count -1", dev.AddInt32(buf.Ptr, -1, 1), "count=-1 is negative")
	wantErr(t, "null", dev.AddInt32(0, 1, 1), "dptr is null")
	wantErr(t, "misaligned", dev.AddInt32(buf.Ptr+2, 1, 1), "is not 4-byte aligned")
}

// ---- a decode step's chain, captured and eager -------------------------------------------------

// chain is a toy decode step's buffers: embedding, rmsnorm, q/k/v linears (q with split-K),
// rope fused with the KV append, attention with forced splits (the fused merge), the output
// and lm-head linears, argmax into the next step's ids, and positions and lengths advanced on
// the device. Contexts start at 254 and cross the 256-token split boundary, so the merge's
// expected arrivals change between replays of one captured epoch.
type chain struct {
	d                                     ref.DType
	batch, vocab, hidden, qHeads, kvHeads int
	headDim, context, capacity            int
	table, normW, wq, wk, wv, wo, wlm     *cgo.Buffer
	x, a, q, k, v, attn, o, logits        *cgo.Buffer
	ids, positions, lens                  *cgo.Buffer
	kCache, vCache                        *cgo.Buffer
	linWS, attnWS, argWS                  *cgo.Buffer
	lq                                    cgo.LinearParams
	att                                   cgo.AttentionParams
	arg                                   cgo.ArgmaxParams
}

func newChain(t *testing.T, dev *cgo.Device) *chain {
	c := &chain{d: ref.BF16, batch: 3, vocab: 203, hidden: 64, qHeads: 4, kvHeads: 2, headDim: 64, context: 254}
	c.capacity = c.context + 5
	el := c.d.Bytes()
	alloc := func(n int) *cgo.Buffer { return mustAlloc(t, dev, uint64(n*el)) }
	c.table, c.normW = alloc(c.vocab*c.hidden), alloc(c.hidden)
	qn, kn := c.qHeads*c.headDim, c.kvHeads*c.headDim
	c.wq, c.wk, c.wv, c.wo, c.wlm = alloc(qn*c.hidden), alloc(kn*c.hidden), alloc(kn*c.hidden), alloc(c.hidden*qn), alloc(c.vocab*c.hidden)
	c.x, c.a, c.q, c.k, c.v = alloc(c.batch*c.hidden), alloc(c.batch*c.hidden), alloc(c.batch*qn), alloc(c.batch*kn), alloc(c.batch*kn)
	c.attn, c.o, c.logits = alloc(c.batch*qn), alloc(c.batch*c.hidden), alloc(c.batch*c.vocab)
	c.ids, c.positions, c.lens = mustAlloc(t, dev, uint64(4*c.batch)), mustAlloc(t, dev, uint64(4*c.batch)), mustAlloc(t, dev, uint64(4*c.batch))
	c.kCache, c.vCache = alloc(c.batch*kn*c.capacity), alloc(c.batch*kn*c.capacity)
	cache := cgo.KVCache{K: c.kCache.Ptr, V: c.vCache.Ptr, Layout: cgo.KVContiguous, DType: cgo.DType(c.d), KVHeads: c.kvHeads,
		HeadDim: c.headDim, Capacity: c.capacity}

	var err error
	var ws uint64
	c.lq, ws, err = dev.LinearPlan(cgo.LinearParams{X: c.a.Ptr, W: c.wq.Ptr, Y: c.q.Ptr, Batch: c.batch, N: qn, K: c.hidden,
		DType: cgo.DType(c.d), Variant: cgo.LinearGEMV, SplitK: 2})
	mustGraph(t, err)
	if c.lq.SplitK != 2 || ws == 0 {
		t.Fatalf("the q linear planned split-K %d with %d workspace bytes, want 2 splits", c.lq.SplitK, ws)
	}
	c.linWS = mustAlloc(t, dev, ws)
	c.lq.Workspace, c.lq.WorkspaceBytes = c.linWS.Ptr, ws

	c.att, ws, err = dev.AttentionPlan(cgo.AttentionParams{Q: c.q.Ptr, Out: c.attn.Ptr, ContextLens: c.lens.Ptr, Cache: cache,
		Batch: c.batch, QHeads: c.qHeads, MaxContext: c.capacity, NumSplits: 3})
	mustGraph(t, err)
	if c.att.NumSplits != 3 || c.att.SplitTokens != 128 {
		t.Fatalf("attention planned %d splits of %d tokens, want 3 of 128 (lengths 255..259 then cross a split)", c.att.NumSplits, c.att.SplitTokens)
	}
	c.attnWS = mustAlloc(t, dev, ws)
	c.att.Workspace, c.att.WorkspaceBytes = c.attnWS.Ptr, ws

	c.arg, ws, err = dev.ArgmaxPlan(cgo.ArgmaxParams{Logits: c.logits.Ptr, IDs: c.ids.Ptr, Batch: c.batch, Vocab: c.vocab,
		DType: cgo.DType(c.d), NumSplits: 2})
	mustGraph(t, err)
	c.argWS = mustAlloc(t, dev, max(ws, 8))
	c.arg.Workspace, c.arg.WorkspaceBytes = c.argWS.Ptr, ws
	return c
}

// reset puts every weight, cache and counter back to its initial value and poisons the rest.
func (c *chain) reset(t *testing.T) {
	for i, b := range []*cgo.Buffer{c.table, c.normW, c.wq, c.wk, c.wv, c.wo, c.wlm, c.kCache, c.vCache} {
		mustGraph(t, b.FillHash(cgo.DType(c.d), b.Bytes/uint64(c.d.Bytes()), uint64(900+i), 0.5))
	}
	for _, b := range []*cgo.Buffer{c.x, c.a, c.q, c.k, c.v, c.attn, c.o, c.logits, c.linWS, c.attnWS, c.argWS} {
		mustGraph(t, b.Memset(0xFF))
	}
	ids, pos, lens := make([]int32, c.batch), make([]int32, c.batch), make([]int32, c.batch)
	for b := range ids {
		ids[b] = int32(ref.Hash64(77, uint64(b)) % uint64(c.vocab))
		pos[b], lens[b] = int32(c.context), int32(c.context+1)
	}
	mustGraph(t, cgo.Write(c.ids, ids))
	mustGraph(t, cgo.Write(c.positions, pos))
	mustGraph(t, cgo.Write(c.lens, lens))
}

// step makes one step's calls on the device's stream (run or captured).
func (c *chain) step(dev *cgo.Device) error {
	dt := cgo.DType(c.d)
	qn, kn := c.qHeads*c.headDim, c.kvHeads*c.headDim
	calls := []func() error{
		func() error {
			return dev.Embedding(cgo.EmbeddingParams{Table: c.table.Ptr, IDs: c.ids.Ptr, Out: c.x.Ptr, Batch: c.batch,
				Vocab: c.vocab, Hidden: c.hidden, DType: dt})
		},
		func() error {
			return dev.RMSNorm(cgo.RMSNormParams{X: c.x.Ptr, Weight: c.normW.Ptr, Out: c.a.Ptr, Batch: c.batch,
				Hidden: c.hidden, Eps: 1e-5, DType: dt})
		},
		func() error { return dev.Linear(c.lq) },
		func() error {
			return dev.Linear(cgo.LinearParams{X: c.a.Ptr, W: c.wk.Ptr, Y: c.k.Ptr, Batch: c.batch, N: kn, K: c.hidden, DType: dt})
		},
		func() error {
			return dev.Linear(cgo.LinearParams{X: c.a.Ptr, W: c.wv.Ptr, Y: c.v.Ptr, Batch: c.batch, N: kn, K: c.hidden, DType: dt})
		},
		func() error {
			return dev.RopeKVAppend(cgo.RopeAppendParams{Q: c.q.Ptr, KNew: c.k.Ptr, VNew: c.v.Ptr, Positions: c.positions.Ptr,
				Cache: c.att.Cache, Rope: cgo.Rope{Theta: 10000, RotaryDim: c.headDim}, Batch: c.batch, QHeads: c.qHeads})
		},
		func() error { return dev.Attention(c.att) },
		func() error {
			return dev.Linear(cgo.LinearParams{X: c.attn.Ptr, W: c.wo.Ptr, Y: c.o.Ptr, Batch: c.batch, N: c.hidden, K: qn, DType: dt})
		},
		func() error {
			return dev.Linear(cgo.LinearParams{X: c.o.Ptr, W: c.wlm.Ptr, Y: c.logits.Ptr, Batch: c.batch, N: c.vocab, K: c.hidden, DType: dt})
		},
		func() error { return dev.Argmax(c.arg) },
		func() error { return dev.AddInt32(c.positions.Ptr, c.batch, 1) },
		func() error { return dev.AddInt32(c.lens.Ptr, c.batch, 1) },
	}
	for i, call := range calls {
		if err := call(); err != nil {
			return fmt.Errorf("call %d of the step: %w", i, err)
		}
	}
	return nil
}

// snapshot is what a step leaves that the next one or the caller reads.
func (c *chain) snapshot(t *testing.T) []byte {
	var out []byte
	for _, b := range []*cgo.Buffer{c.logits, c.ids, c.positions, c.lens, c.attn, c.kCache, c.vCache} {
		raw := make([]byte, b.Bytes)
		mustGraph(t, b.CopyToHost(raw))
		out = append(out, raw...)
	}
	return out
}

const chainSteps = 5

func (c *chain) eager(t *testing.T, dev *cgo.Device) [][]byte {
	c.reset(t)
	var snaps [][]byte
	for range chainSteps {
		mustGraph(t, c.step(dev))
		snaps = append(snaps, c.snapshot(t))
	}
	return snaps
}

func (c *chain) replayed(t *testing.T, dev *cgo.Device) [][]byte {
	c.reset(t)
	mustGraph(t, dev.BeginGraph())
	if err := c.step(dev); err != nil {
		_, _ = dev.EndGraph()
		t.Fatal(err)
	}
	g, err := dev.EndGraph()
	mustGraph(t, err)
	defer g.Close()
	// The capture ran nothing: the ids are still step 0's and the logits poisoned.
	if c.snapshot(t)[0] != 0xFF {
		t.Fatalf("the capture ran the step")
	}
	var snaps [][]byte
	for range chainSteps {
		mustGraph(t, g.Launch())
		snaps = append(snaps, c.snapshot(t))
	}
	return snaps
}

func compareSnapshots(t *testing.T, c *chain, eager, graph [][]byte) {
	t.Helper()
	for s := range eager {
		if !bytes.Equal(eager[s], graph[s]) {
			at := 0
			for at < len(eager[s]) && eager[s][at] == graph[s][at] {
				at++
			}
			t.Fatalf("step %d: the replayed graph differs from the eager chain at byte %d of the snapshot "+
				"(logits %d bytes, then ids, positions, lengths, attention output, caches)", s, at, c.logits.Bytes)
		}
	}
}

func TestGraphReplayMatchesEagerChain(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	c := newChain(t, dev)
	eager := c.eager(t, dev)
	// The chain does something step to step: the lengths advance and the ids change.
	if bytes.Equal(eager[0][:c.logits.Bytes], eager[chainSteps-1][:c.logits.Bytes]) {
		t.Fatal("the eager chain's logits are the same at the first and last step")
	}
	compareSnapshots(t, c, eager, c.replayed(t, dev))
	// And under the emulator's hazard schedules (replays run each record as a launch would).
	for _, schedule := range []string{"reverse", "interleave:3"} {
		t.Run(schedule, func(t *testing.T) {
			t.Setenv("DB_EMU_SCHEDULE", schedule)
			compareSnapshots(t, c, eager, c.replayed(t, dev))
		})
	}
}
