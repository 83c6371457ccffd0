// Package model describes the decode shape of a large language model and the
// arithmetic of one decode step: parameters, the bytes a step must read, its
// FLOPs, and the distinct kernel shapes it launches.
//
// A decode step produces one token for each of the B sequences in a batch. It
// reads every weight once (for a mixture of experts, only the experts the batch
// touches) plus the KV cache of every sequence, so these counts set the memory
// side of the roofline:
//
//	step bytes = WeightBytesPerStep(B) + B * KVBytesPerSequence(S)
//	step FLOPs = FLOPsPerStep(B, S)
//
// All counts are the minimum the step must move or do: each input read once,
// each output written once, in decimal units (1 GB = 1e9 bytes) wherever a
// caller prints them. A Shape may be one GPU's tensor-parallel shard of a model
// (see Shape.Shard); every count then describes that one GPU.
//
// Beyond Llama's layer, a Shape holds what the models deployed today add: dense
// first layers and shared experts beside the routed ones, sliding-window and
// chunked attention spans per layer, QK-norm, attention sinks, multi-head latent
// attention (counted in the absorbed form a decode step runs), and quantized
// weight formats with their scales (Quantization).
//
// Shapes come from Presets (checked against published parameter counts), from
// Lookup by name, or from a Hugging Face config.json (LoadHFConfig).
package model
