package ref

import (
	"hash/fnv"
	"math"
)

// The synthetic weights of a decode step. The device fills every tensor of a step with
// db_fill_hash(seed, scale) and the float64 forward pass regenerates the same values with
// Fill, so no weight file exists anywhere and any configuration runs. A tensor is named by
// its layer (-1 for tensors outside the layers) and one of the names below; its seed and its
// scale are fixed here, once, for both sides.

// Tensor names of a step. Linear weights are row-major [n, k] (Y = X W^T); the fused
// projections stack their parts along n in the order given.
const (
	TensorEmbedding      = "embedding"    // [vocab, hidden]
	TensorLMHead         = "lm_head"      // [vocab, hidden]; absent with tied embeddings (the embedding is used)
	TensorLMHeadBias     = "lm_head_bias" // [vocab]
	TensorFinalNorm      = "final_norm"   // [hidden]
	TensorAttnNorm       = "attn_norm"    // [hidden], before attention
	TensorMLPNorm        = "mlp_norm"     // [hidden], before the MLP
	TensorQKV            = "qkv"          // [(q_heads + 2 kv_heads) head_dim, hidden]: q rows, then k, then v
	TensorQKVBias        = "qkv_bias"     // [(q_heads + 2 kv_heads) head_dim]
	TensorQNorm          = "q_norm"       // [head_dim] (QK-norm)
	TensorKNorm          = "k_norm"       // [head_dim]
	TensorO              = "o"            // [hidden, q_heads head_dim]
	TensorOBias          = "o_bias"       // [hidden]
	TensorSinks          = "sinks"        // f32 [q_heads]
	TensorGateUp         = "gate_up"      // [2 ffn, hidden]: gate rows, then up (gated MLP); [ffn, hidden] up only otherwise
	TensorGateUpBias     = "gate_up_bias"
	TensorDown           = "down" // [hidden, ffn]
	TensorDownBias       = "down_bias"
	TensorRouter         = "router"         // [experts, hidden]
	TensorRouterBias     = "router_bias"    // [experts]
	TensorExpertUp       = "expert_gate_up" // [experts, 2 expert_ffn, hidden]
	TensorExpertDown     = "expert_down"    // [experts, hidden, expert_ffn]
	TensorSharedUp       = "shared_gate_up" // [2 shared_ffn, hidden]
	TensorSharedDown     = "shared_down"    // [hidden, shared_ffn]
	TensorKCache         = "k_cache"        // contiguous [batch, kv_heads, capacity, head_dim]: tokens before the first step
	TensorVCache         = "v_cache"
	TensorTokens         = "tokens"              // the first step's input ids: TokenID(base, b, vocab)
	TensorPostAttnNorm   = "post_attn_norm"      // [hidden]: Gemma 2/3's norm after attention (UnitScale)
	TensorPostMLPNorm    = "post_mlp_norm"       // [hidden]: after the MLP
	TensorExpertUpBias   = "expert_gate_up_bias" // [experts, 2 expert_ffn]: MLPBias in a mixture of experts
	TensorExpertDownBias = "expert_down_bias"    // [experts, hidden]
	TensorSharedUpBias   = "shared_gate_up_bias" // [2 shared_ffn]
	TensorSharedDownBias = "shared_down_bias"    // [hidden]

	// Multi-head latent attention (DeepSeek-V3, Kimi-K2) in the absorbed form; nope and rope
	// are qk_nope_head_dim and qk_rope_head_dim, latent kv_lora_rank. TensorO is then
	// [hidden, q_heads v_head_dim].
	TensorQA          = "q_a"          // [q_lora_rank, hidden]: the query's down projection
	TensorQANorm      = "q_a_norm"     // [q_lora_rank]: q_a_layernorm (UnitScale)
	TensorQB          = "q_b"          // [q_heads (nope + rope), q_lora_rank]: each head's q_nope rows, then its q_pe
	TensorQ           = "q"            // [q_heads (nope + rope), hidden]: in place of q_a and q_b when q_lora_rank is 0
	TensorKVA         = "kv_a"         // [latent + rope, hidden]: the latent's down projection, then the shared k_pe
	TensorKVANorm     = "kv_a_norm"    // [latent]: kv_a_layernorm (UnitScale)
	TensorWUK         = "w_uk"         // [q_heads, latent, nope]: kv_b's key part per head, transposed for y = x W^T
	TensorWUV         = "w_uv"         // [q_heads, v_head_dim, latent]: kv_b's value part per head
	TensorLatentCache = "latent_cache" // contiguous [batch, capacity, latent + rope]: tokens before the first step (CacheScale)
)

// TensorSeed is the fill seed of tensor name in layer (-1: outside the layers) for a step
// whose base seed is base.
func TensorSeed(base uint64, layer int, name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return Hash64(base^h.Sum64(), uint64(int64(layer)+1))
}

// Fill scales: a linear weight with k inputs is uniform in ±sqrt(3/k), so each output has
// about the variance of one input and activations stay near 1 through any depth; biases are
// ±0.1; norm weights, the embedding table, sinks and the initial caches are ±1.
func LinearWeightScale(k int) float32 { return float32(math.Sqrt(3 / float64(k))) }

const (
	BiasScale  float32 = 0.1
	UnitScale  float32 = 1
	CacheScale float32 = 1
)

// TokenID is sequence b's input token of the first step.
func TokenID(base uint64, b, vocab int) int32 {
	return int32(uint64(HashWord(TensorSeed(base, -1, TensorTokens), uint64(b))) % uint64(vocab))
}
