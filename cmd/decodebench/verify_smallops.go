package main

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
)

// `decodebench verify smallop OP`: one small op of a decode step run once on hashed inputs
// (outputs poisoned with NaN first) and checked against bench/ref, element by element.

// errSmallOpFlag marks a flag value the command itself refuses.
var errSmallOpFlag = errors.New("bad flag")

var smallOps = []string{"embedding", "rmsnorm", "rope", "act", "bias", "argmax", "moe"}

func verifySmallOpCommand() *cli.Command {
	cmd := &cli.Command{
		Name:      "smallop",
		Usage:     "check one small op of a decode step: " + strings.Join(smallOps, ", "),
		UsageText: "decodebench verify smallop OP [--batch B] [--hidden H] [--vocab V] [--dtype bf16|fp16] [op flags] [--backend auto|cuda|emu] [--seed S] [--json]",
		Description: "embedding: rows of a [vocab x hidden] table by token id. rmsnorm: [--residual] [--unit-offset].\n" +
			"rope: rotary embedding fused with the KV append (--q-heads, --kv-heads, --head-dim, --rotary-dim,\n" +
			"--position, --rope default|linear|dynamic|llama3, --theta). act: silu or gelu_tanh (--activation)\n" +
			"of a [batch x 2*hidden] gate_up. bias: a bias added to [batch x hidden]. argmax: greedy ids of\n" +
			"[batch x vocab] logits. moe: route, group and combine (--experts, --top-k, --topk-first, --renormalize).",
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			return usageError("verify smallop needs an op: %s", strings.Join(smallOps, ", "))
		},
	}
	for _, op := range smallOps {
		op := op
		cmd.Subcommands = append(cmd.Subcommands, &cli.Command{
			Name:         op,
			Usage:        "check " + op + " (see verify smallop --help)",
			Flags:        smallOpFlags(),
			OnUsageError: onUsageError,
			Action:       func(c *cli.Context) error { return verifySmallOpAction(c, op) },
		})
	}
	return cmd
}

func smallOpFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.IntFlag{Name: "batch", Value: 1, Usage: "rows (sequences or tokens)"},
		&cli.IntFlag{Name: "hidden", Value: 4096, Usage: "row length (the ffn width for act), a multiple of 8"},
		&cli.IntFlag{Name: "vocab", Value: 32000, Usage: "vocabulary (embedding, argmax)"},
		&cli.StringFlag{Name: "dtype", Value: "bf16", Usage: "bf16 or fp16"},
		&cli.BoolFlag{Name: "residual", Usage: "rmsnorm: add a residual first (and check the stored sum)"},
		&cli.BoolFlag{Name: "unit-offset", Usage: "rmsnorm: scale by 1 + weight (Gemma)"},
		&cli.IntFlag{Name: "q-heads", Value: 32, Usage: "rope: query heads"},
		&cli.IntFlag{Name: "kv-heads", Value: 8, Usage: "rope: KV heads"},
		&cli.IntFlag{Name: "head-dim", Value: 128, Usage: "rope: 64, 80, 96, 128 or 256"},
		&cli.IntFlag{Name: "rotary-dim", Usage: "rope: rotated elements of a head, even; 0 = head-dim"},
		&cli.IntFlag{Name: "position", Value: 1000, Usage: "rope: position of every sequence's new token"},
		&cli.StringFlag{Name: "rope", Value: "default", Usage: "rope scaling: default, linear (factor 4), dynamic (NTK, factor 2 past 2048) or llama3 (factor 8, 1 / 4, 8192)"},
		&cli.Float64Flag{Name: "theta", Value: 500000, Usage: "rope theta"},
		&cli.StringFlag{Name: "activation", Value: "silu", Usage: "act: silu or gelu_tanh"},
		&cli.IntFlag{Name: "experts", Value: 8, Usage: "moe: experts"},
		&cli.IntFlag{Name: "top-k", Value: 2, Usage: "moe: experts per token"},
		&cli.BoolFlag{Name: "topk-first", Usage: "moe: top k of the logits, then their softmax (else softmax, then top k)"},
		&cli.BoolFlag{Name: "renormalize", Usage: "moe: divide the top k probabilities by their sum"},
		seedFlag(""),
		jsonFlag(),
	}, backendFlags()...)
}

// smallOpCheck is one output of an op against its reference.
type smallOpCheck struct {
	Output     string    `json:"output"`
	Passed     bool      `json:"passed"`
	Reason     string    `json:"reason,omitempty"`
	Count      int       `json:"count"`
	WorstError jsonFloat `json:"worst_abs_err"`
}

type smallOpReport struct {
	Op     string         `json:"op"`
	Passed bool           `json:"passed"`
	DType  string         `json:"dtype"`
	Batch  int            `json:"batch"`
	Checks []smallOpCheck `json:"checks"`
	Seed   uint64         `json:"seed"`
	ranOn
}

func verifySmallOpAction(c *cli.Context, op string) error {
	if c.NArg() > 0 {
		return usageError("verify smallop %s takes no arguments (got %q)", op, c.Args().First())
	}
	d, err := ref.ParseDType(c.String("dtype"))
	if err != nil || (d != ref.BF16 && d != ref.FP16) {
		return usageError("--dtype %q: the small ops take bf16 or fp16", c.String("dtype"))
	}
	if c.Int("batch") < 1 { // the library refuses a batch past its limit, naming both
		return usageError("--batch %d: want 1 or more", c.Int("batch"))
	}
	backend, err := parseBackendFlags(c)
	if err != nil {
		return err
	}
	lib, dev, err := backend.open()
	if err != nil {
		return err
	}
	defer dev.Close()
	v := &smallOpRun{c: c, dev: dev, d: d, batch: c.Int("batch"), seed: c.Uint64("seed")}
	defer v.close()
	if err := v.run(op); err != nil {
		// the library refuses a bad shape before any launch, with the value named: a usage error
		if errors.Is(err, cgo.ErrUnsupportedShape) || errors.Is(err, cgo.ErrInvalidArgument) || errors.Is(err, errSmallOpFlag) {
			return usageError("verify smallop %s: %v", op, err)
		}
		return failure("verify smallop %s: %v", op, err)
	}
	rep := smallOpReport{Op: op, Passed: true, DType: d.String(), Batch: v.batch, Checks: v.checks, Seed: v.seed, ranOn: newRanOn(lib, dev)}
	reason := ""
	for _, ch := range v.checks {
		if !ch.Passed && rep.Passed {
			rep.Passed, reason = false, ch.Output+": "+ch.Reason
		}
	}
	out := c.App.Writer
	return finishVerify(out, c.Bool("json"), "smallop "+op, rep, rep.Passed, reason, func() {
		fmt.Fprintf(out, "verify smallop %s: batch %d, %v, seed %d on the %s\n", op, v.batch, d, v.seed, describeDevice(lib, dev))
		for _, ch := range v.checks {
			verdict := "ok"
			if !ch.Passed {
				verdict = "FAILED: " + ch.Reason
			}
			fmt.Fprintf(out, "  %-22s %9d elements, worst |error| %.3g: %s\n", ch.Output, ch.Count, float64(ch.WorstError), verdict)
		}
	})
}

// smallOpRun holds one verification's device buffers.
type smallOpRun struct {
	c      *cli.Context
	dev    *cgo.Device
	d      ref.DType
	batch  int
	seed   uint64
	next   uint64
	bufs   []*cgo.Buffer
	checks []smallOpCheck
}

func (v *smallOpRun) close() {
	for _, b := range v.bufs {
		b.Close()
	}
}

func (v *smallOpRun) alloc(bytes int) (*cgo.Buffer, error) {
	b, err := v.dev.Alloc(uint64(bytes))
	if err == nil {
		v.bufs = append(v.bufs, b)
		err = b.Memset(0xFF) // poison: NaN in every float dtype, -1 as int32
	}
	return b, err
}

// filled is n hashed elements of d (a fresh seed each call) and their values.
func (v *smallOpRun) filled(d ref.DType, n int) (*cgo.Buffer, []float32, error) {
	b, err := v.alloc(n * d.Bytes())
	if err != nil {
		return nil, nil, err
	}
	seed := ref.Hash64(v.seed, v.next)
	v.next++
	return b, ref.Fill(d, seed, 1, n), b.FillHash(cgo.DType(d), uint64(n), seed, 1)
}

func (v *smallOpRun) ints(vals []int32) (*cgo.Buffer, error) {
	b, err := v.alloc(4 * len(vals))
	if err == nil {
		err = cgo.Write(b, vals)
	}
	return b, err
}

func (v *smallOpRun) readInts(b *cgo.Buffer, n int) []float32 {
	got := make([]int32, n)
	if err := cgo.Read(b, got); err != nil {
		return make([]float32, n) // zeros: an unread buffer fails its check
	}
	f := make([]float32, n)
	for i, x := range got {
		f[i] = float32(x)
	}
	return f
}

func (v *smallOpRun) readFloats(b *cgo.Buffer, d ref.DType, n int) []float32 {
	raw := make([]byte, n*d.Bytes())
	if err := b.CopyToHost(raw); err != nil {
		return make([]float32, n)
	}
	got, _ := ref.Decode(d, raw)
	return got
}

// check records got against want with per-element bounds (nil: exact).
func (v *smallOpRun) check(output string, got []float32, want, bounds []float64) {
	if bounds == nil {
		bounds = make([]float64, len(want))
	}
	cmp := ref.Compare(got, want, bounds, math.Inf(1))
	v.checks = append(v.checks, smallOpCheck{Output: output, Passed: cmp.Passed, Reason: cmp.Reason(), Count: cmp.Count,
		WorstError: jsonFloat(cmp.Worst.AbsErr)})
}

func widenInts(x []int32) []float64 {
	f := make([]float64, len(x))
	for i, e := range x {
		f[i] = float64(e)
	}
	return f
}

func (v *smallOpRun) run(op string) error {
	c, d, batch, hidden := v.c, v.d, v.batch, v.c.Int("hidden")
	dt := cgo.DType(d)
	switch op {
	case "embedding":
		vocab := c.Int("vocab")
		table, tv, err := v.filled(d, vocab*hidden)
		if err != nil {
			return err
		}
		ids := make([]int32, batch)
		for b := range ids {
			ids[b] = int32(ref.Hash64(v.seed, uint64(b)) % uint64(max(vocab, 1)))
		}
		idBuf, err := v.ints(ids)
		if err != nil {
			return err
		}
		out, err := v.alloc(batch * hidden * d.Bytes())
		if err != nil {
			return err
		}
		if err := v.dev.Embedding(cgo.EmbeddingParams{Table: table.Ptr, IDs: idBuf.Ptr, Out: out.Ptr, Batch: batch, Vocab: vocab, Hidden: hidden, DType: dt}); err != nil {
			return err
		}
		want, bounds := ref.Embedding(d, tv, ids, hidden, 0)
		v.check("out", v.readFloats(out, d, batch*hidden), want, bounds)
	case "rmsnorm":
		x, xv, err := v.filled(d, batch*hidden)
		if err != nil {
			return err
		}
		w, wv, err := v.filled(d, hidden)
		if err != nil {
			return err
		}
		out, err := v.alloc(batch * hidden * d.Bytes())
		if err != nil {
			return err
		}
		p := cgo.RMSNormParams{X: x.Ptr, Weight: w.Ptr, Out: out.Ptr, Batch: batch, Hidden: hidden, Eps: 1e-5, UnitOffset: c.Bool("unit-offset"), DType: dt}
		var res *cgo.Buffer
		var rv []float32
		if c.Bool("residual") {
			if res, rv, err = v.filled(d, batch*hidden); err != nil {
				return err
			}
			p.Residual = res.Ptr
		}
		if err := v.dev.RMSNorm(p); err != nil {
			return err
		}
		r := ref.RMSNorm(d, xv, rv, wv, hidden, float64(float32(1e-5)), p.UnitOffset)
		v.check("out", v.readFloats(out, d, batch*hidden), r.Want, r.Bounds)
		if res != nil {
			sum := make([]float64, len(r.Sum))
			for i, s := range r.Sum {
				sum[i] = float64(s)
			}
			v.check("residual (the sum)", v.readFloats(res, d, batch*hidden), sum, nil)
		}
	case "act", "bias":
		if op == "bias" {
			y, yv, err := v.filled(d, batch*hidden)
			if err != nil {
				return err
			}
			bias, bv, err := v.filled(d, hidden)
			if err != nil {
				return err
			}
			if err := v.dev.BiasAdd(cgo.BiasAddParams{Y: y.Ptr, Bias: bias.Ptr, Batch: batch, N: hidden, DType: dt}); err != nil {
				return err
			}
			want, bounds := ref.BiasAdd(d, yv, bv, hidden)
			v.check("y", v.readFloats(y, d, batch*hidden), want, bounds)
			return nil
		}
		act := map[string]cgo.Activation{"silu": cgo.ActSiLU, "gelu_tanh": cgo.ActGeLUTanh}
		a, ok := act[c.String("activation")]
		if !ok {
			return fmt.Errorf("%w: --activation %q: want silu or gelu_tanh", errSmallOpFlag, c.String("activation"))
		}
		gu, guv, err := v.filled(d, 2*batch*hidden)
		if err != nil {
			return err
		}
		out, err := v.alloc(batch * hidden * d.Bytes())
		if err != nil {
			return err
		}
		if err := v.dev.GatedAct(cgo.GatedActParams{GateUp: gu.Ptr, Out: out.Ptr, Batch: batch, FFN: hidden, Activation: a, DType: dt}); err != nil {
			return err
		}
		want, bounds := ref.GatedAct(d, ref.Activation(a), guv, hidden)
		v.check("out", v.readFloats(out, d, batch*hidden), want, bounds)
	case "argmax":
		vocab := c.Int("vocab")
		logits, lv, err := v.filled(d, batch*vocab)
		if err != nil {
			return err
		}
		ids, err := v.alloc(4 * batch)
		if err != nil {
			return err
		}
		p, ws, err := v.dev.ArgmaxPlan(cgo.ArgmaxParams{Logits: logits.Ptr, IDs: ids.Ptr, Batch: batch, Vocab: vocab, DType: dt})
		if err != nil {
			return err
		}
		if ws > 0 {
			w, err := v.alloc(int(ws))
			if err != nil {
				return err
			}
			p.Workspace, p.WorkspaceBytes = w.Ptr, w.Bytes
		}
		if err := v.dev.Argmax(p); err != nil {
			return err
		}
		v.check("ids", v.readInts(ids, batch), widenInts(ref.Argmax(lv, vocab)), nil)
	case "rope":
		return v.runRope()
	case "moe":
		return v.runMoE()
	}
	return nil
}

func (v *smallOpRun) runRope() error {
	c, d, batch := v.c, v.d, v.batch
	qh, kvh, hd, pos := c.Int("q-heads"), c.Int("kv-heads"), c.Int("head-dim"), c.Int("position")
	rot := c.Int("rotary-dim")
	if rot == 0 {
		rot = hd
	}
	r := ref.Rope{Theta: float64(float32(c.Float64("theta"))), RotaryDim: rot}
	switch c.String("rope") {
	case "default":
	case "linear":
		r.Scaling, r.Factor = ref.RopeLinear, 4
	case "dynamic":
		r.Scaling, r.Factor, r.OriginalMaxPositions = ref.RopeDynamicNTK, 2, 2048
	case "llama3":
		r.Scaling, r.Factor, r.LowFreqFactor, r.HighFreqFactor, r.OriginalMaxPositions = ref.RopeLlama3, 8, 1, 4, 8192
	default:
		return fmt.Errorf("%w: --rope %q: want default, linear, dynamic or llama3", errSmallOpFlag, c.String("rope"))
	}
	if qh < 1 || kvh < 1 || pos < 0 || pos >= math.MaxInt32 {
		return fmt.Errorf("%w: --q-heads %d, --kv-heads %d and --position %d: want heads >= 1 and a position 0..2^31-2", errSmallOpFlag, qh, kvh, pos)
	}
	capacity := pos + 1
	k, err := v.alloc(batch * kvh * capacity * hd * d.Bytes())
	if err != nil {
		return err
	}
	vc, err := v.alloc(batch * kvh * capacity * hd * d.Bytes())
	if err != nil {
		return err
	}
	q, qv, err := v.filled(d, batch*qh*hd)
	if err != nil {
		return err
	}
	kn, knv, err := v.filled(d, batch*kvh*hd)
	if err != nil {
		return err
	}
	vn, vnv, err := v.filled(d, batch*kvh*hd)
	if err != nil {
		return err
	}
	positions := make([]int32, batch)
	for b := range positions {
		positions[b] = int32(pos)
	}
	pb, err := v.ints(positions)
	if err != nil {
		return err
	}
	cache := cgo.KVCache{K: k.Ptr, V: vc.Ptr, Layout: cgo.KVContiguous, DType: cgo.DType(d), KVHeads: kvh, HeadDim: hd, Capacity: capacity}
	if err := v.dev.RopeKVAppend(cgo.RopeAppendParams{Q: q.Ptr, KNew: kn.Ptr, VNew: vn.Ptr, Positions: pb.Ptr, Cache: cache,
		Rope: cgo.Rope{Theta: float32(r.Theta), Scaling: cgo.RopeScaling(r.Scaling), Factor: float32(r.Factor), LowFreqFactor: float32(r.LowFreqFactor),
			HighFreqFactor: float32(r.HighFreqFactor), OriginalMaxPositions: r.OriginalMaxPositions, RotaryDim: rot},
		Batch: batch, QHeads: qh}); err != nil {
		return err
	}
	rows := func(src []float32, heads int, rope ref.Rope, at int) (want, bounds []float64) {
		for h := 0; h < batch*heads; h++ {
			w, b := ref.RopeHead(rope, d, src[h*hd:(h+1)*hd], at)
			want, bounds = append(want, w...), append(bounds, b...)
		}
		return want, bounds
	}
	want, bounds := rows(qv, qh, r, pos)
	v.check("q (rotated)", v.readFloats(q, d, batch*qh*hd), want, bounds)
	gotK, gotV := v.readFloats(k, d, batch*kvh*capacity*hd), v.readFloats(vc, d, batch*kvh*capacity*hd)
	var newK, newV []float32
	for h := 0; h < batch*kvh; h++ {
		row := (h*capacity + pos) * hd
		newK, newV = append(newK, gotK[row:row+hd]...), append(newV, gotV[row:row+hd]...)
	}
	want, bounds = rows(knv, kvh, r, pos)
	v.check("k cache (rotated)", newK, want, bounds)
	want, _ = rows(vnv, kvh, ref.Rope{RotaryDim: 2}, 0) // position 0 turns nothing: a copy
	v.check("v cache", newV, want, nil)
	return nil
}

func (v *smallOpRun) runMoE() error {
	c, d, batch, hidden := v.c, v.d, v.batch, v.c.Int("hidden")
	experts, topK := c.Int("experts"), c.Int("top-k")
	mode := ref.MoESoftmaxTopK
	if c.Bool("topk-first") {
		mode = ref.MoETopKSoftmax
	}
	slots := batch * max(topK, 0)
	logits, lv, err := v.filled(d, batch*experts)
	if err != nil {
		return err
	}
	ids, err := v.alloc(4 * max(slots, 1))
	if err != nil {
		return err
	}
	weights, err := v.alloc(4 * max(slots, 1))
	if err != nil {
		return err
	}
	if err := v.dev.MoERoute(cgo.MoERouteParams{Logits: logits.Ptr, TopKIDs: ids.Ptr, TopKWeights: weights.Ptr, Batch: batch, Experts: experts,
		TopK: topK, Mode: cgo.MoERouting(mode), Renormalize: c.Bool("renormalize"), DType: cgo.DType(d)}); err != nil {
		return err
	}
	wantIDs, wantW, boundW := ref.MoERoute(lv, experts, topK, mode, c.Bool("renormalize"))
	v.check("route ids", v.readInts(ids, slots), widenInts(wantIDs), nil)
	v.check("route weights", v.readFloats(weights, ref.F32, slots), wantW, boundW)
	counts, err := v.alloc(4 * experts)
	if err != nil {
		return err
	}
	offsets, err := v.alloc(4 * (experts + 1))
	if err != nil {
		return err
	}
	sorted, err := v.alloc(4 * slots)
	if err != nil {
		return err
	}
	rows, err := v.alloc(4 * slots)
	if err != nil {
		return err
	}
	if err := v.dev.MoEGroup(cgo.MoEGroupParams{TopKIDs: ids.Ptr, ExpertCounts: counts.Ptr, ExpertOffsets: offsets.Ptr, SortedSlots: sorted.Ptr,
		SlotRows: rows.Ptr, Batch: batch, TopK: topK, Experts: experts}); err != nil {
		return err
	}
	g := ref.MoEGroup(wantIDs, experts)
	v.check("group counts", v.readInts(counts, experts), widenInts(g.Counts), nil)
	v.check("group offsets", v.readInts(offsets, experts+1), widenInts(g.Offsets), nil)
	v.check("group sorted slots", v.readInts(sorted, slots), widenInts(g.SortedSlots), nil)
	v.check("group slot rows", v.readInts(rows, slots), widenInts(g.SlotRows), nil)
	y, yv, err := v.filled(d, slots*hidden)
	if err != nil {
		return err
	}
	out, err := v.alloc(batch * hidden * d.Bytes())
	if err != nil {
		return err
	}
	if err := v.dev.MoECombine(cgo.MoECombineParams{YSorted: y.Ptr, SlotRows: rows.Ptr, TopKWeights: weights.Ptr, Out: out.Ptr, Batch: batch,
		TopK: topK, Hidden: hidden, DType: cgo.DType(d)}); err != nil {
		return err
	}
	want, bounds := ref.MoECombine(d, yv, g.SlotRows, v.readFloats(weights, ref.F32, slots), topK, hidden)
	v.check("combine", v.readFloats(out, d, batch*hidden), want, bounds)
	return nil
}
