package model

import (
	"bytes"
	"strings"
)

// quantization reads quantization_config: nil without one.
func (c hfConfig) quantization() (*Quantization, error) {
	if !c.has("quantization_config") {
		return nil, nil
	}
	q, err := c.sub("quantization_config", c.typeName())
	if err != nil {
		return nil, err
	}
	q.within = ""
	method, err := q.str("quant_method", "")
	if err != nil {
		return nil, err
	}
	field := func(key string) string { return "quantization_config." + key }
	intField := func(keys []string, def int) (int, error) {
		for _, k := range keys {
			if q.has(k) {
				text := strings.TrimSpace(string(q.fields[k]))
				if text == "-1" {
					return 0, nil // gptq's group_size -1: one group per row
				}
				v, err := q.positiveInt(k, 0, true)
				if err != nil {
					return 0, c.errorf("%s: %v", field(k), err)
				}
				return v, nil
			}
		}
		return def, nil
	}
	var out Quantization
	switch method {
	case "mxfp4":
		out = Quantization{Method: QuantMXFP4, Bits: 4, GroupSize: 32}
	case "fp8":
		// transformers' FineGrainedFP8Config: weight_block_size defaults to 128 x 128.
		out = Quantization{Method: QuantFP8, Bits: 8, BlockN: 128, BlockK: 128}
		if block, ok, err := q.intList("weight_block_size"); err != nil {
			return nil, err
		} else if ok {
			if len(block) != 2 || block[0] <= 0 || block[1] <= 0 {
				return nil, c.errorf("%s = %s: want two positive sizes, [rows, columns]", field("weight_block_size"), bytes.TrimSpace(q.fields["weight_block_size"]))
			}
			out.BlockN, out.BlockK = block[0], block[1]
		}
	case "fbgemm_fp8":
		out = Quantization{Method: QuantFP8, Bits: 8} // one scale per output channel
	case "awq", "gptq":
		out = Quantization{Method: method, Zeros: true}
		if out.Bits, err = intField([]string{"bits", "w_bit"}, 4); err != nil {
			return nil, err
		}
		if out.GroupSize, err = intField([]string{"group_size", "q_group_size"}, 128); err != nil {
			return nil, err
		}
		if method == "awq" {
			if out.Zeros, err = q.boolean("zero_point", true); err != nil {
				return nil, err
			}
		} else if out.GIdx, err = q.boolean("desc_act", false); err != nil {
			return nil, err
		}
		if out.Bits < 2 || out.Bits > 8 {
			return nil, c.errorf("%s = %d: want 2..8 bits", field("bits"), out.Bits)
		}
	case "":
		return nil, c.errorf("quantization_config has no quant_method: accepted are mxfp4, fp8, fbgemm_fp8, awq and gptq")
	default:
		return nil, c.errorf("quantization_config quant_method %q is not supported: accepted are mxfp4, fp8, fbgemm_fp8, awq and gptq; for other formats use the unquantized config.json and set the weight dtype", method)
	}
	kept, _, err := q.strList("modules_to_not_convert")
	if err != nil {
		return nil, c.errorf("%s", strings.Replace(err.Error(), "modules_to_not_convert", field("modules_to_not_convert"), 1))
	}
	for _, m := range kept {
		switch {
		case strings.Contains(m, "self_attn") || strings.HasSuffix(m, ".attn") || strings.Contains(m, ".attn."):
			out.AttentionKept = true
		case strings.Contains(m, "router") || strings.HasSuffix(m, ".gate") || strings.Contains(m, "embed_tokens") ||
			strings.Contains(m, "lm_head") || strings.Contains(m, "vision") || strings.Contains(m, "visual") ||
			strings.Contains(m, "multi_modal_projector") || strings.Contains(m, "norm"):
			// never quantized here, or not part of the shape
		default:
			return nil, c.errorf("%s entry %q is not modelled: decodebench cannot tell which weights it keeps unquantized; accepted entries name self_attn, the router (gate), embed_tokens, lm_head, norms or the vision parts",
				field("modules_to_not_convert"), m)
		}
	}
	return &out, nil
}
