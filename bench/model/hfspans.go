package model

import "bytes"

// spans reads which layers attend through a sliding window or within a chunk, and which
// apply no rotary embedding.
func (c hfConfig) spans(arch hfArch, s *Shape) error {
	if err := c.chunksAndLayerTypesRead(arch, s); err != nil {
		return err
	}
	var err error
	if arch.window == windowLlama4 || arch.noRoPE {
		rope := 0
		flags, listed, err := c.intList("no_rope_layers")
		if err != nil {
			return err
		}
		if listed {
			if len(flags) != s.Layers {
				return c.errorf("no_rope_layers has %d entries for num_hidden_layers = %d: want one (1: rotary, 0: none) per layer", len(flags), s.Layers)
			}
			for _, f := range flags {
				rope += min(max(f, 0), 1)
			}
		} else {
			interval, err := c.positiveInt("no_rope_layer_interval", 4, false)
			if err != nil {
				return err
			}
			for i := 0; i < s.Layers; i++ {
				if (i+1)%interval != 0 {
					rope++
				}
			}
		}
		s.NoRoPELayers = s.Layers - rope
		if s.QKNorm == "l2" && rope == 0 {
			s.QKNorm = ""
		}
		if arch.window == windowLlama4 && !c.has("layer_types") && c.has("attention_chunk_size") {
			if s.AttentionChunk, err = c.positiveInt("attention_chunk_size", 0, true); err != nil {
				return err
			}
			s.ChunkedLayers = rope
			return nil
		}
	}
	if arch.layerTypes && c.has("layer_types") {
		return c.layerTypes(arch, s)
	}
	switch arch.window {
	case windowGemma3:
		pattern, err := c.positiveInt("sliding_window_pattern", 6, false)
		if err != nil {
			return err
		}
		if s.SlidingWindow, err = c.positiveInt("sliding_window", 4096, false); err != nil {
			return err
		}
		for i := 0; i < s.Layers; i++ {
			if (i+1)%pattern != 0 {
				s.SlidingLayers++
			}
		}
		if s.SlidingLayers == 0 {
			s.SlidingWindow = 0
		}
		return nil
	case windowGptOss:
		if s.SlidingWindow, err = c.positiveInt("sliding_window", 128, false); err != nil {
			return err
		}
		s.SlidingLayers = (s.Layers + 1) / 2
		return nil
	case windowLlama4:
		return nil
	}
	s.SlidingWindow, s.SlidingLayers, err = c.slidingWindow(arch.window, s.Layers)
	return err
}

// chunksAndLayerTypesRead refuses a layer_types list or an attention chunk that the model type
// does not read, where it asks for spans the type's own window rule would not give: transformers
// ignores such keys in these types today, but a file that carries them means something the
// count would miss. A list of full_attention only asks for nothing beyond the rule.
func (c hfConfig) chunksAndLayerTypesRead(arch hfArch, s *Shape) error {
	if !arch.layerTypes && c.has("layer_types") {
		types, _, err := c.strList("layer_types")
		if err != nil {
			return err
		}
		for i, t := range types {
			if t != "full_attention" {
				return c.errorf("layer_types[%d] = %q: per-layer attention types are not read for model_type %q (it takes its spans from its own window rule), so decodebench would count this model wrong and refuses it",
					i, t, s.Family)
			}
		}
	}
	if arch.window == windowLlama4 || !c.truthy("attention_chunk_size") {
		return nil
	}
	if types, _, err := c.strList("layer_types"); err == nil && arch.layerTypes {
		for _, t := range types {
			if t == "chunked_attention" {
				return nil
			}
		}
	}
	return c.errorf("attention_chunk_size = %s: chunked attention is not modelled for model_type %q (llama4_text's chunked layers, or chunked_attention entries in layer_types, are)",
		bytes.TrimSpace(c.fields["attention_chunk_size"]), s.Family)
}

// layerTypes counts a layer_types list: full_attention, sliding_attention (sliding_window
// tokens) and chunked_attention (attention_chunk_size tokens).
func (c hfConfig) layerTypes(arch hfArch, s *Shape) error {
	types, _, err := c.strList("layer_types")
	if err != nil {
		return err
	}
	if len(types) != s.Layers {
		return c.errorf("layer_types has %d entries for num_hidden_layers = %d: want one per layer", len(types), s.Layers)
	}
	sliding, chunked := 0, 0
	for i, t := range types {
		switch t {
		case "full_attention":
		case "sliding_attention":
			sliding++
		case "chunked_attention":
			chunked++
		default:
			return c.errorf("layer_types[%d] = %q is not modelled: accepted are full_attention, sliding_attention and chunked_attention", i, t)
		}
	}
	if sliding > 0 {
		def := map[windowRule]int{windowEveryOther: 4096, windowGemma3: 4096, windowGptOss: 128}[arch.window]
		if s.SlidingWindow, err = c.positiveInt("sliding_window", def, def == 0); err != nil {
			return err
		}
		s.SlidingLayers = sliding
	}
	if chunked > 0 {
		if s.AttentionChunk, err = c.positiveInt("attention_chunk_size", 0, true); err != nil {
			return err
		}
		s.ChunkedLayers = chunked
	}
	return nil
}

// slidingWindow reads sliding_window (null or absent: none) and which of the layers use it.
func (c hfConfig) slidingWindow(rule windowRule, layers int) (window, slidingLayers int, err error) {
	switch rule {
	case windowNone:
		return 0, 0, nil
	case windowEveryOther:
		if window, err = c.positiveInt("sliding_window", 4096, false); err != nil {
			return 0, 0, err
		}
		return window, (layers + 1) / 2, nil
	case windowQwen2:
		use, err := c.boolean("use_sliding_window", false)
		if err != nil || !use || !c.has("sliding_window") {
			return 0, 0, err
		}
		if window, err = c.positiveInt("sliding_window", 0, true); err != nil {
			return 0, 0, err
		}
		from, err := c.positiveInt("max_window_layers", layers, false)
		if err != nil {
			return 0, 0, err
		}
		if from >= layers {
			return 0, 0, nil
		}
		return window, layers - from, nil
	}
	if !c.has("sliding_window") {
		return 0, 0, nil
	}
	if window, err = c.positiveInt("sliding_window", 0, true); err != nil {
		return 0, 0, err
	}
	return window, layers, nil
}
