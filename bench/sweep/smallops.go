package sweep

import "github.com/decodebench/decodebench/bench/model"

// SmallOp is a per-token operation of a decode step that moves few bytes and does no matrix
// work: decodebench does not launch it, it bounds its time by bytes / the measured read
// bandwidth. A real kernel for it also pays a launch (a few microseconds each, unless fused
// or captured in a CUDA graph), which this bound leaves out.
type SmallOp struct {
	Name    string  `json:"name"`
	Repeat  float64 `json:"repeat"` // calls per step
	Bytes   float64 `json:"bytes"`  // per call: inputs read once, outputs written once
	Seconds float64 `json:"seconds_per_step"`
}

// SmallOpsMethod is what a record says of its small ops.
const SmallOpsMethod = "bounded, not measured: bytes / measured read bandwidth, launch overhead not included"

// SmallOps lists the small per-token operations of one decode step of batch sequences, with
// their bytes (Seconds left zero): the embedding gather, the RMSNorms, the residual adds, the
// rotary embedding of q and k, the KV-cache append, the MLP activation (SiLU x up for a gated
// MLP), a mixture of experts' top-k routing, and the sampling that reads the logits.
func SmallOps(s model.Shape, batch int) []SmallOp {
	b := float64(max(batch, 1))
	h := float64(s.Hidden)
	layers := float64(s.Layers)
	act := s.ActivationDType().Bytes()
	w := s.WeightDType.Bytes()
	kvWidth := float64(s.KVElementsPerLayerToken()) // a key and a value per KV head, or MLA's latent and rotary key
	ops := []SmallOp{
		// One row of the table per token, written out as the first hidden state.
		{Name: "embedding_gather", Repeat: 1, Bytes: b*h*w + b*h*act},
		// Read the hidden state and the norm's weight vector, write the normalized state.
		{Name: "rmsnorm", Repeat: layers*float64(s.NormsPerLayer()) + 1, Bytes: 2*b*h*act + h*w},
		// After attention and after the MLP: read two states, write their sum.
		{Name: "residual_add", Repeat: 2 * layers, Bytes: 3 * b * h * act},
		// Rotate q and k in place: read and write each.
		{Name: "rotary", Repeat: float64(s.RotaryLayers()), Bytes: 2 * b * float64(s.RotaryElementsPerLayerToken()) * act},
		// Copy the new token's k and v from the QKV output into the cache.
		{Name: "kv_append", Repeat: layers, Bytes: b*kvWidth*act + b*kvWidth*s.KVDType.Bytes()},
	}
	for _, n := range s.AttentionNorms() { // QK-norm, MLA's latent norms: read and write each value
		ops = append(ops, SmallOp{Name: n.Name, Repeat: float64(n.Layers), Bytes: 2*b*float64(n.Elements)*act + float64(n.Weights)*w})
	}
	if denseLayers, ffn := s.DenseMLP(); ffn > 0 {
		ops = append(ops, activationOp("mlp_activation", float64(denseLayers), b, float64(ffn), s.GatedMLP, act))
	}
	if s.IsMoE() {
		k, moeLayers := float64(s.ExpertsPerToken), float64(s.MoELayers())
		ops = append(ops,
			SmallOp{Name: "router_topk", Repeat: moeLayers, Bytes: b*float64(s.Experts)*act + b*k*(4+4)},
			activationOp("expert_activation", moeLayers, b*k, float64(s.ExpertFFN), s.GatedMLP, act))
		if s.SharedFFN() > 0 {
			ops = append(ops, activationOp("shared_expert_activation", moeLayers, b, float64(s.SharedFFN()), s.GatedMLP, act))
		}
	}
	// Greedy sampling reads every logit once and writes a token id.
	return append(ops, SmallOp{Name: "sampling", Repeat: 1, Bytes: b*float64(s.Vocab)*act + b*4})
}

// activationOp reads the up (and gate) projection's output and writes the activation.
func activationOp(name string, repeat, tokens, width float64, gated bool, act float64) SmallOp {
	in := tokens * width * act
	if gated {
		in *= 2
	}
	return SmallOp{Name: name, Repeat: repeat, Bytes: in + tokens*width*act}
}

// boundSmallOps fills each op's Seconds (per step) from the read bandwidth and returns the sum
// of their time and of their bytes per step. A bandwidth that is not positive leaves them at
// zero: the record then says they were not counted.
func boundSmallOps(ops []SmallOp, readBytesPerSec float64) (seconds, bytes float64) {
	for i := range ops {
		perStep := ops[i].Bytes * ops[i].Repeat
		bytes += perStep
		if readBytesPerSec > 0 {
			ops[i].Seconds = perStep / readBytesPerSec
			seconds += ops[i].Seconds
		}
	}
	return seconds, bytes
}
