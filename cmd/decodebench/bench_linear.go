package main

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/decodebench/decodebench/bench/axes"
	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/bench/telemetry"
	"github.com/decodebench/decodebench/cgo"
)

// `decodebench bench linear`: the decode linear layers of a model, or one N x K shape.

func benchLinearCommand() *cli.Command {
	return &cli.Command{
		Name:  "linear",
		Usage: "time the decode linear layers of a model (or one N x K shape) at each batch size",
		UsageText: "decodebench bench linear (--model NAME [--tp N] | --n N --k K) [--batch LIST] [--dtype bf16|fp16] " +
			"[--weight-dtype bf16|fp16|fp8|fp8-tensor|fp8-block|int8|int4|int4-zp|mxfp4 [--group-size G]] [--variant auto|gemv|mma|tiled|cublas] [--peer cublas] [--backend auto|cuda|emu] [--out FILE.jsonl] [--json]\n\n   LIST syntax: " + axes.Syntax,
		Description: "With --model, every distinct linear shape of one decode step (fused QKV, O, fused gate/up,\n" +
			"down, LM head; routers and experts for a mixture of experts) at each batch size; a shape the\n" +
			"kernels lack (quantized or fp8 weights, grouped linears) is listed as skipped, naming the kernel.\n" +
			"The read probe runs first: % READ is the achieved bandwidth over that measured ceiling; then\n" +
			"an empty kernel's launch-to-launch time (the launch baseline). --peer cublas also measures\n" +
			"cuBLASLt on every shape, verified and timed the same way: CUBLAS/OURS = cuBLAS time / ours\n" +
			"(> 1: ours is faster), n/a where cuBLASLt cannot run (the emulator, no libcublasLt).",
		Flags: append(append(shapeFlags("1-256*2"),
			&cli.IntFlag{Name: "n", Usage: "output features (rows of W), instead of --model"},
			&cli.IntFlag{Name: "k", Usage: "input features, a positive multiple of 8, instead of --model"},
			&cli.StringFlag{Name: "variant", Value: "auto", Usage: "kernel: gemv, mma, tiled, cublas (cuBLASLt) or auto"},
			&cli.StringFlag{Name: "peer",
				Usage: "cublas: also time cuBLASLt on every shape the same way, with the ratio cuBLAS time / ours (> 1: ours is faster)"},
			&cli.IntFlag{Name: "split-k", Usage: fmt.Sprintf("K splits of the gemv or tiled variant, 1..%d; 0 lets the kernel choose", cgo.MaxSplitK)},
		), benchFlags()...),
		OnUsageError: onUsageError,
		Action:       benchLinearAction,
	}
}

// linearJob is one linear measurement of a command line.
type linearJob struct {
	name      string // qkv_proj, ..., or "linear" for --n/--k
	spec      measure.LinearSpec
	stepBatch int
	missing   string // the kernel the library lacks for this call (sweep.MissingKernel): skipped
	// grouped, for a grouped linear (MLA's absorbed q_absorb and v_absorb), is what is measured
	// in spec's place (spec keeps its batch, n and k for the table), laid out as the sweep does.
	grouped *measure.GroupedSpec
}

func parseBenchLinear(c *cli.Context) (jobs []linearJob, modelName string, tp int, err error) {
	if c.NArg() > 0 {
		return nil, "", 0, usageError("bench linear takes no arguments (got %q)", c.Args().First())
	}
	batches, err := parseBatches(c, cgo.MaxBatch, "the linear kernels")
	if err != nil {
		return nil, "", 0, err
	}
	variant, err := cgo.ParseLinearVariant(c.String("variant"))
	if err != nil {
		return nil, "", 0, usageError("--variant: %v", err)
	}
	splitK := c.Int("split-k")
	switch {
	case splitK < 0 || splitK > cgo.MaxSplitK:
		return nil, "", 0, usageError("--split-k %d: want 0 (the kernel chooses) or a count of splits in 1..%d", splitK, cgo.MaxSplitK)
	case (variant == cgo.LinearMMA || variant == cgo.LinearCUBLAS) && splitK > 1:
		return nil, "", 0, usageError("--split-k %d: only the gemv and tiled variants split K (not %s)", splitK, variant)
	}
	explicit := c.IsSet("n") || c.IsSet("k")
	haveModel := c.String("model") != "" || c.String("model-config") != ""
	switch {
	case explicit && haveModel:
		return nil, "", 0, usageError("give either --model (or --model-config) or --n and --k, not both")
	case explicit:
		if c.IsSet("kv-dtype") {
			return nil, "", 0, usageError("--kv-dtype %q: a linear layer of --n and --k has no KV cache; --weight-dtype gives its weights' format", c.String("kv-dtype"))
		}
		n, k := c.Int("n"), c.Int("k")
		if n < 1 || n > math.MaxInt32 {
			return nil, "", 0, usageError("--n %d: want 1..%d output features", n, math.MaxInt32)
		}
		if k < 8 || k%8 != 0 || k > math.MaxInt32 {
			return nil, "", 0, usageError("--k %d: want a positive multiple of 8 (rows are read as 16-byte vectors)", k)
		}
		dtype, err := parseKernelDType(c, "")
		if err != nil {
			return nil, "", 0, err
		}
		weights, err := parseWeightDType(c, c.String("weight-dtype"), dtype)
		if err != nil {
			return nil, "", 0, err
		}
		if err := weights.checkShape(n, k); err != nil {
			return nil, "", 0, err
		}
		for _, b := range batches {
			jobs = append(jobs, linearJob{name: "linear", stepBatch: b,
				spec: measure.LinearSpec{Batch: b, N: n, K: k, DType: dtype, Variant: variant, SplitK: splitK,
					WeightFormat: weights.format, GroupSize: weights.group}})
		}
		return jobs, "", 0, nil
	case !haveModel:
		return nil, "", 0, usageError("bench linear needs --model NAME (or --model-config FILE), or --n N --k K")
	}
	// --weight-dtype is the model's (resolveModel): its projections are measured in the format
	// the shape says, as the sweep measures them.
	shape, err := resolveModel(c)
	if err != nil {
		return nil, "", 0, err
	}
	dtype, err := parseKernelDType(c, shape.ActivationDType())
	if err != nil {
		return nil, "", 0, err
	}
	// Kernel-major: each distinct shape at every batch, in launch order; shapes that coincide
	// within a step (same M, N, K) are measured once under both names.
	var order []string
	byName := map[string][]linearJob{}
	for _, b := range batches {
		seen := map[[3]int]int{}
		var step []linearJob
		for _, k := range shape.Kernels(b, 1) {
			if k.Kind != model.KindLinear && k.Kind != model.KindLinearGrouped {
				continue
			}
			missing := sweep.MissingKernel(k, shape) // a grouped linear with quantized weights lacks its kernel
			spec := measure.LinearSpec{Batch: k.M, N: k.N, K: k.K, DType: dtype, Variant: variant, SplitK: splitK}
			var grouped *measure.GroupedSpec
			if k.Kind == model.KindLinearGrouped && missing == "" {
				g := sweep.MLAGroupedSpec(k, shape)
				g.DType = dtype
				grouped = &g
			}
			if k.Kind == model.KindLinear && k.WeightFormat != "" && missing == "" {
				// the config's own format (quantization_config), as the sweep measures it
				spec.WeightFormat, spec.GroupSize, _ = sweep.WeightFormatOf(shape)
			}
			key := [3]int{k.M, k.N, k.K}
			if i, dup := seen[key]; dup && step[i].missing == missing && step[i].grouped == nil && grouped == nil {
				step[i].name += "+" + k.Name
				continue
			}
			seen[key] = len(step)
			step = append(step, linearJob{name: k.Name, stepBatch: b, missing: missing, spec: spec, grouped: grouped})
		}
		for _, j := range step {
			if _, ok := byName[j.name]; !ok {
				order = append(order, j.name)
			}
			byName[j.name] = append(byName[j.name], j)
		}
	}
	for _, name := range order {
		jobs = append(jobs, byName[name]...)
	}
	return jobs, shape.Name, shape.TP, nil
}

func benchLinearAction(c *cli.Context) error {
	jobs, modelName, tp, err := parseBenchLinear(c)
	if err != nil {
		return err
	}
	peer, err := parsePeer(c.String("peer"))
	if err != nil {
		return err
	}
	variant := cgo.LinearAuto
	if len(jobs) > 0 {
		variant = jobs[0].spec.Variant
	}
	if peer != cgo.LinearAuto && variant == peer {
		return usageError("--peer %s with --variant %s would time %s against itself: give --variant auto, gemv, mma or tiled", peer, variant, peer)
	}
	settings, err := parseBenchSettings(c, true)
	if err != nil {
		return err
	}
	// Forcing a variant the device cannot run is known from its plan, before any timing.
	var check func(*cgo.Device) error
	if variant == cgo.LinearCUBLAS {
		check = func(dev *cgo.Device) error {
			if why := planPeer(dev, jobs, variant); why != "" {
				return usageError("--variant %s cannot run here: %s", variant, why)
			}
			return nil
		}
	}
	s, err := openBench(c, settings, "linear", check)
	if err != nil {
		return err
	}
	defer s.close()
	if err := s.begin(modelName, tp, len(jobs), "linear"); err != nil {
		return err
	}
	// The peer: where its plan fails for the first shape (the emulator, no libcublasLt) it
	// cannot run at all, and the reason is said once.
	peerNA := ""
	if peer != cgo.LinearAuto {
		s.say("peer %s: CUBLAS/OURS = %s median time / ours (> 1: ours is faster), both verified and timed the same way\n", peer, peer)
		if peerNA = planPeer(s.dev, jobs, peer); peerNA != "" {
			s.say("peer %s: n/a: %s\n", peer, peerNA)
			if s.settings.asJSON { // no table to say it: the records' peer_note and this line do
				fmt.Fprintf(s.stderr, "peer %s n/a: %s\n", peer, peerNA)
			}
		}
	}
	header := fmt.Sprintf("%-16s %-26s %-12s %11s %7s %9s %7s %9s", "KERNEL", "SHAPE", "VARIANT", "MEDIAN", "SPREAD", "GB/s", "% READ", "TFLOP/s")
	if peer != cgo.LinearAuto {
		header += fmt.Sprintf(" %11s %11s", strings.ToUpper(peer.String()), strings.ToUpper(peer.String())+"/OURS")
	}
	s.say("%s  %s\n", header, "NOTE")
	for i, j := range jobs {
		shape := fmt.Sprintf("B=%d N=%d K=%d", j.spec.Batch, j.spec.N, j.spec.K)
		label := j.name + " " + shape
		o, tel := s.measureLinear(j, settings)
		s.progress(i+1, len(jobs), label, o)
		r := s.linearRecord(j, o, tel, modelName, tp)
		peerCells := ""
		if peer != cgo.LinearAuto {
			r.PeerNote = peerNA
			switch {
			case peerNA != "":
			case j.missing != "" || o.Status == measure.StatusSkipped:
				r.PeerNote = "not measured: ours was skipped"
			case j.grouped != nil:
				r.PeerNote = "not measured: the peer has no grouped linear"
			default:
				pj := j
				pj.spec.Variant, pj.spec.SplitK = peer, 0
				po, ptel := s.measureLinear(pj, settings)
				s.progress(i+1, len(jobs), label+" ("+peer.String()+" peer)", po)
				pr := s.linearRecord(pj, po, ptel, modelName, tp)
				r.Peer = &pr
				if pr.Status == measure.StatusFailed {
					s.failed = append(s.failed, label+" ("+peer.String()+" peer): "+pr.Reason)
				}
				switch {
				case po.Status != measure.StatusOK:
					r.PeerNote = peer.String() + " " + po.Status + ": " + po.Reason
				case o.Status != measure.StatusOK:
					r.PeerNote = "ours " + o.Status
				default:
					r.PeerRatio = po.Stats.Median / o.Stats.Median
				}
			}
			peerCells = fmt.Sprintf(" %11s %11s", "n/a", "n/a")
			if r.Peer != nil && r.Peer.Status == measure.StatusOK {
				peerCells = fmt.Sprintf(" %11s %11s", micros(r.Peer.MedianSeconds), "n/a")
			}
			if r.PeerRatio > 0 {
				peerCells = fmt.Sprintf(" %11s %11.2f", micros(r.Peer.MedianSeconds), r.PeerRatio)
			}
		}
		if err := s.emit(r, label); err != nil {
			return err
		}
		variant := r.Variant
		if r.SplitK > 1 {
			variant += fmt.Sprintf(" /%d", r.SplitK)
		}
		n := note(o, tel)
		if r.PeerNote != "" && r.PeerNote != peerNA { // the one reason for all is said above the table
			n = strings.TrimPrefix(n+"; peer "+r.PeerNote, "; ")
		}
		s.say("%-16s %-26s %-12s %11s %6.2f%% %9.0f %7s %9.2f%s  %s\n", j.name, shape, variant, micros(o.Stats.Median),
			100*o.Stats.Spread, o.AchievedBytesPerSec/1e9, percent(r.FractionOfRead), o.AchievedFLOPsPerSec/1e12, peerCells, n)
	}
	return s.finish()
}

// measureLinear runs one job (skipped where it needs a kernel the library lacks, or more memory
// than --max-gb) inside a telemetry window.
func (s *benchSession) measureLinear(j linearJob, settings benchSettings) (measure.Outcome, telemetry.Summary) {
	return s.measure(func() measure.Outcome {
		if j.missing != "" {
			return missingKernel("linear", j.missing)
		}
		if o, skip := settings.aboveMaxBytes("linear", float64(j.spec.MinDeviceBytes())); skip {
			return o
		}
		if j.grouped != nil {
			if o, skip := settings.aboveMaxBytes("linear_grouped", float64(j.grouped.MinDeviceBytes())); skip {
				return o
			}
			return measure.Grouped(s.dev, *j.grouped, settings.opts)
		}
		return measure.Linear(s.dev, j.spec, settings.opts)
	})
}

// linearRecord is the JSON record of one linear measurement.
func (s *benchSession) linearRecord(j linearJob, o measure.Outcome, tel telemetry.Summary, modelName string, tp int) benchRecord {
	r := s.record("linear", j.name, o, tel)
	r.Model, r.TP, r.Batch, r.N, r.K = modelName, tp, j.spec.Batch, j.spec.N, j.spec.K
	r.DType = j.spec.DType.String()
	if j.spec.WeightFormat != cgo.WeightDense {
		r.WeightFormat, r.GroupSize = j.spec.WeightFormat.String(), j.spec.GroupSize
	}
	if j.missing != "" { // no kernel, so no element type was chosen
		r.DType, r.WeightFormat, r.GroupSize = "", "", 0
	}
	if j.stepBatch != j.spec.Batch {
		r.StepBatch = j.stepBatch
	}
	r.Variant, r.SplitK = j.spec.Variant.String(), j.spec.SplitK
	if j.grouped != nil {
		r.Groups = j.grouped.Groups
	}
	if o.Plan.Variant != "" { // auto, resolved by the plan
		r.Variant = o.Plan.Variant
	}
	if o.Plan.SplitK > 0 {
		r.SplitK = o.Plan.SplitK
	}
	return r
}

// planPeer plans variant for the first job the library has a kernel for: "" when it plans,
// else why not (the emulator, no libcublasLt: the same for every shape). Nothing is allocated.
func planPeer(dev *cgo.Device, jobs []linearJob, variant cgo.LinearVariant) string {
	for _, j := range jobs {
		if j.missing != "" || j.grouped != nil {
			continue
		}
		// Any aligned non-zero address plans: nothing is read.
		const address = 1 << 20
		_, _, err := dev.LinearPlan(cgo.LinearParams{X: address, W: address, Y: address,
			Batch: j.spec.Batch, N: j.spec.N, K: j.spec.K, DType: j.spec.DType, Variant: variant})
		if errors.Is(err, cgo.ErrUnsupportedShape) {
			return err.Error()
		}
		return ""
	}
	return ""
}
