package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/decodebench/decodebench/bench/fileio"
	"github.com/decodebench/decodebench/bench/internal/textdist"
)

// hfArch is what one Hugging Face model_type implies beyond the fields its
// config.json states, following transformers' modeling code.
type hfArch struct {
	tiedByDefault bool // tie_word_embeddings when the file omits it
	// kvHeadsFromHeads: a missing num_key_value_heads means one per query head.
	// Where transformers' default is instead a fixed number of one checkpoint
	// (Mistral and Mixtral 8, Qwen2 32, Gemma 16) the field is required.
	kvHeadsFromHeads bool
	// headDimRequired: transformers' default head_dim is Gemma-7B's 256, not
	// hidden/heads, so the file must state it; elsewhere headDimDefault, or
	// hidden/heads when that is 0.
	headDimRequired bool
	headDimDefault  int
	// vocabDefault is transformers' vocab_size when the file omits it and every
	// checkpoint relies on it (Gemma 3's text_config states none); 0: required.
	vocabDefault   int
	qkvBias        bool // Q, K and V always have a bias (Qwen2), O none
	readsBiasFlags bool // attention_bias (Q, K, V and O) is honoured, and for llama mlp_bias
	biasDefault    bool // attention_bias when the file omits it (gpt-oss: true)
	qkvBiasFlag    bool // attention_bias gives Q, K and V a bias, not O (GLM-4.5)
	qkNorm         string
	sinks          bool // attention sinks (gpt-oss)
	normBias       bool // LayerNorm with bias (PhiMoE), and lm_head_bias is read
	moe            moeRule
	mla            bool // multi-head latent attention (DeepSeek-V3's fields)
	// window says which layers use sliding_window (or chunks), as transformers' modeling code
	// does; layerTypes: a layer_types list, where given, says it instead.
	window     windowRule
	layerTypes bool
	// gdn: Gated DeltaNet layers between gated attention layers (hfhybrid.go).
	gdn bool
	// noRoPE: no_rope_layers (or no_rope_layer_interval) leaves some layers without rotary
	// (SmolLM3), as Llama 4's does.
	noRoPE bool
	// defaults are the config class's values for keys a file may omit (transformers writes a
	// config without the fields equal to its class's defaults: Gemma 3's text_config).
	defaults map[string]int
	// pattern: hybrid_override_pattern says what each layer is (nemotron_h; hfhybrid.go).
	pattern bool
	// mtp: the checkpoint may hold num_nextn_predict_layers multi-token-prediction layers,
	// which a plain decode step does not run and the shape leaves out.
	mtp bool
}

// windowRule is how a model type applies config.json's sliding_window.
type windowRule int

const (
	windowNone       windowRule = iota // full attention in every layer (Llama, Gemma)
	windowAllLayers                    // every layer, when sliding_window is set (Mistral, Mixtral, Phi-3)
	windowEveryOther                   // layers 0, 2, 4, ... (Gemma 2's local layers); default 4096
	windowQwen2                        // layers from max_window_layers on, when use_sliding_window
	windowGemma3                       // all but every sliding_window_pattern-th layer (default 6); default 4096
	windowGptOss                       // layers 0, 2, 4, ...; default 128
	windowLlama4                       // chunked attention_chunk_size in the layers with rotary
)

// moeRule is how a model type states its mixture of experts.
type moeRule int

const (
	moeNone     moeRule = iota
	moeMixtral          // num_local_experts of intermediate_size, in every layer (Mixtral, PhiMoE)
	moeQwen3            // num_experts of moe_intermediate_size; decoder_sparse_step, mlp_only_layers
	moeDeepSeek         // n_routed_experts and n_shared_experts of moe_intermediate_size; first_k_dense_replace, moe_layer_freq
	moeLlama4           // num_local_experts and a shared expert of intermediate_size; moe_layers or interleave_moe_layer_step; dense layers of intermediate_size_mlp
	moeGptOss           // num_local_experts of intermediate_size with biases, a router with bias
)

// hfArchs are the supported model_types. All have gated MLPs: SwiGLU, or GeGLU
// for Gemma (hidden_activation); Phi-3 fuses qkv_proj and gate_up_proj in its
// checkpoint but holds the same parameters.
var hfArchs = map[string]hfArch{
	"llama":   {kvHeadsFromHeads: true, readsBiasFlags: true},
	"mistral": {window: windowAllLayers},
	"mixtral": {moe: moeMixtral, window: windowAllLayers},
	"qwen2":   {qkvBias: true, window: windowQwen2, layerTypes: true},
	"gemma":   {tiedByDefault: true, headDimRequired: true, readsBiasFlags: true},
	"gemma2":  {tiedByDefault: true, headDimRequired: true, readsBiasFlags: true, window: windowEveryOther, layerTypes: true},
	"phi3":    {kvHeadsFromHeads: true, window: windowAllLayers},

	"qwen3":       {headDimDefault: 128, readsBiasFlags: true, qkNorm: "rms", window: windowQwen2, layerTypes: true},
	"qwen3_moe":   {headDimDefault: 128, readsBiasFlags: true, qkNorm: "rms", moe: moeQwen3, window: windowQwen2, layerTypes: true},
	"llama4_text": {headDimDefault: 128, readsBiasFlags: true, moe: moeLlama4, window: windowLlama4, layerTypes: true},
	"gemma3_text": {tiedByDefault: true, headDimDefault: 256, vocabDefault: 262208, readsBiasFlags: true, qkNorm: "rms",
		window: windowGemma3, layerTypes: true,
		// Gemma3TextConfig's defaults (the 1B-like base): gemma-3-4b-it's text_config omits them.
		defaults: map[string]int{"hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
			"num_attention_heads": 8, "num_key_value_heads": 4}},
	// Dense and MoE models behind newer type names, read as the family they are.
	"ministral3":        {window: windowAllLayers}, // Devstral 2, Ministral 3: Mistral's layers
	"qwen3_vl_text":     {headDimDefault: 128, readsBiasFlags: true, qkNorm: "rms", window: windowQwen2, layerTypes: true},
	"qwen3_vl_moe_text": {headDimDefault: 128, readsBiasFlags: true, qkNorm: "rms", moe: moeQwen3, window: windowQwen2, layerTypes: true},
	"smollm3": {tiedByDefault: true, readsBiasFlags: true, noRoPE: true, window: windowQwen2, layerTypes: true,
		defaults: map[string]int{"num_key_value_heads": 4}},
	"deepseek_v3": {kvHeadsFromHeads: true, readsBiasFlags: true, moe: moeDeepSeek, mla: true, mtp: true},
	"kimi_k2":     {kvHeadsFromHeads: true, readsBiasFlags: true, moe: moeDeepSeek, mla: true, mtp: true},
	"gpt_oss": {headDimDefault: 64, readsBiasFlags: true, biasDefault: true, sinks: true, moe: moeGptOss,
		window: windowGptOss, layerTypes: true},
	"phimoe":   {readsBiasFlags: true, normBias: true, moe: moeMixtral, window: windowAllLayers},
	"glm4_moe": {headDimDefault: 128, qkvBiasFlag: true, moe: moeDeepSeek, mtp: true},

	"nemotron_h":       {headDimDefault: 128, mtp: true, pattern: true},
	"qwen3_next":       {headDimDefault: 256, readsBiasFlags: true, qkNorm: "rms", moe: moeQwen3, gdn: true},
	"qwen3_5_text":     {headDimDefault: 256, readsBiasFlags: true, qkNorm: "rms", gdn: true},
	"qwen3_5_moe_text": {headDimDefault: 256, readsBiasFlags: true, qkNorm: "rms", moe: moeQwen3, gdn: true},
}

// hfWrappers are the multimodal model_types whose language model is their text_config, with
// the model_type a text_config without one has (transformers' sub-config default).
var hfWrappers = map[string]string{
	"llama4":       "llama4_text",
	"gemma3":       "gemma3_text",
	"mistral3":     "mistral",
	"qwen3_5":      "qwen3_5_text",
	"qwen3_vl":     "qwen3_vl_text",
	"qwen3_vl_moe": "qwen3_vl_moe_text",
	"kimi_k25":     "kimi_k2",
	"qwen3_5_moe":  "qwen3_5_moe_text",
}

// LoadHFConfig reads a Hugging Face config.json; a directory means the
// config.json inside it (a downloaded model snapshot).
func LoadHFConfig(path string) (Shape, error) {
	if info, err := os.Stat(path); err == nil && info.IsDir() {
		file := filepath.Join(path, "config.json")
		if _, err := os.Stat(file); errors.Is(err, os.ErrNotExist) {
			return Shape{}, fmt.Errorf("model config %s is a folder without a config.json (%s); give a config.json file or the folder of a downloaded model that holds one", path, file)
		}
		path = file
	}
	data, err := fileio.ReadInput(path, fileio.ConfigBytes)
	if err != nil {
		return Shape{}, fmt.Errorf("reading model config: %w", err)
	}
	return ParseHFConfig(data, path)
}

// ParseHFConfig builds a Shape from the bytes of a Hugging Face config.json;
// source names the file in errors and becomes Shape.Source. The weight dtype is
// torch_dtype (or dtype, its name since transformers 4.56), bf16 when absent; a
// quantization_config gives the format of the quantized projections (Quant).
// The KV cache takes the weight dtype. A multimodal config (llama4, gemma3,
// mistral3) is read from its text_config; the vision tower and projector are
// left out (Shape.LeftOut says so).
func ParseHFConfig(data []byte, source string) (Shape, error) {
	c := hfConfig{source: source}
	data = pythonJSON(data)
	if err := json.Unmarshal(data, &c.fields); err != nil || c.fields == nil {
		return Shape{}, fmt.Errorf("model config %s: not a JSON object: %s; want a Hugging Face config.json, {\"model_type\": ..., \"hidden_size\": ...}", source, notObject(data, err))
	}
	modelType, err := c.str("model_type", "")
	if err != nil {
		return Shape{}, err
	}
	outer := c
	var leftOut string
	if textType, ok := hfWrappers[modelType]; ok {
		if c, err = c.sub("text_config", modelType); err != nil {
			return Shape{}, err
		}
		if modelType, err = c.str("model_type", textType); err != nil {
			return Shape{}, err
		}
		leftOut = "vision tower and multimodal projector (" + outer.typeName() + "'s text_config read)"
	}
	if err := c.refuseMissingLayerKind(modelType); err != nil {
		return Shape{}, err
	}
	arch, ok := hfArchs[modelType]
	if !ok {
		switch {
		case modelType == "":
			return Shape{}, c.errorf("model_type is missing: accepted are %s", supportedModelTypes())
		case c.has("text_config"):
			return Shape{}, c.errorf("model_type %q is not supported, nor is its text_config read: %s", modelType, nearestModelTypes(modelType))
		}
		return Shape{}, c.errorf("model_type %q is not supported: %s", modelType, nearestModelTypes(modelType))
	}
	s := Shape{Name: hfName(outer, source), Family: modelType, GatedMLP: true, TP: 1, Source: source, LeftOut: leftOut}
	if err := c.refuseUnmodelled(arch, modelType); err != nil {
		return Shape{}, err
	}

	ints := []struct {
		key string
		dst *int
		def int
	}{
		{"hidden_size", &s.Hidden, 0}, {"intermediate_size", &s.FFN, 0}, {"num_hidden_layers", &s.Layers, 0},
		{"num_attention_heads", &s.QHeads, 0}, {"vocab_size", &s.Vocab, arch.vocabDefault},
	}
	for i, f := range ints {
		if def, ok := arch.defaults[f.key]; ok && f.def == 0 {
			ints[i].def, f.def = def, def
		}
		// Qwen3.5-MoE states no intermediate_size: its layers are all experts (a dense layer of
		// mlp_only_layers then asks for it, in experts).
		if f.key == "intermediate_size" && arch.gdn && arch.moe != moeNone && !c.has(f.key) {
			continue
		}
		if *f.dst, err = c.positiveInt(f.key, f.def, f.def == 0); err != nil {
			return Shape{}, err
		}
	}
	if s.MaxPositions, err = c.positiveInt("max_position_embeddings", 0, false); err != nil {
		return Shape{}, err
	}
	kvDefault, kvHasDefault := arch.defaults["num_key_value_heads"]
	if !kvHasDefault {
		kvDefault = s.QHeads
	}
	if !arch.kvHeadsFromHeads && !kvHasDefault && !c.has("num_key_value_heads") {
		return Shape{}, c.errorf("num_key_value_heads is missing: %s configs must state it (transformers' default fits one checkpoint only)", modelType)
	}
	if arch.headDimRequired && !c.has("head_dim") {
		return Shape{}, c.errorf("head_dim is missing: %s configs must state it (transformers' default, 256, fits Gemma-7B only)", modelType)
	}
	if s.KVHeads, err = c.positiveInt("num_key_value_heads", kvDefault, false); err != nil {
		return Shape{}, err
	}
	if s.QHeads%s.KVHeads != 0 {
		return Shape{}, c.errorf("num_attention_heads = %d is not a multiple of num_key_value_heads = %d", s.QHeads, s.KVHeads)
	}
	headDim := arch.headDimDefault
	if headDim == 0 {
		if !c.has("head_dim") && !arch.headDimRequired && !arch.mla && s.Hidden%s.QHeads != 0 {
			return Shape{}, c.errorf("head_dim is missing and hidden_size = %d is not a multiple of num_attention_heads = %d", s.Hidden, s.QHeads)
		}
		headDim = s.Hidden / s.QHeads
	}
	if arch.pattern && !c.has("head_dim") && c.has("attention_head_dim") { // Nemotron-H's older name
		if headDim, err = c.positiveInt("attention_head_dim", 0, true); err != nil {
			return Shape{}, err
		}
	}
	if s.HeadDim, err = c.positiveInt("head_dim", headDim, false); err != nil {
		return Shape{}, err
	}
	if s.TiedEmbeddings, err = c.boolean("tie_word_embeddings", arch.tiedByDefault); err != nil {
		return Shape{}, err
	}
	if err := c.attentionDetails(arch, &s); err != nil {
		return Shape{}, err
	}
	if err := c.experts(arch, &s); err != nil {
		return Shape{}, err
	}
	switch {
	case arch.gdn:
		err = c.gatedDeltaNet(&s)
	case arch.pattern:
		// Mamba-2 blocks' widths and the experts are read with the pattern; the weight dtype,
		// read below, is also the state's default.
		if s.WeightDType, err = c.weightDType(); err == nil {
			err = c.nemotronH(arch, &s)
		}
	default:
		err = c.spans(arch, &s)
	}
	if err != nil {
		return Shape{}, err
	}
	if arch.mtp {
		if n, err := c.nonNegativeInt("num_nextn_predict_layers", 0); err != nil {
			return Shape{}, err
		} else if n > 0 {
			s.LeftOut = joinLeftOut(s.LeftOut, fmt.Sprintf("%d multi-token-prediction layer(s) (num_nextn_predict_layers), which a plain decode step does not run", n))
		}
	}
	// The weight dtype and quantization_config sit on the outer config of a multimodal model
	// (and sometimes on its text_config too).
	dtypeFrom := outer
	if !outer.has("torch_dtype") && !outer.has("dtype") {
		dtypeFrom = c
	}
	if s.WeightDType, err = dtypeFrom.weightDType(); err != nil {
		return Shape{}, err
	}
	s.KVDType = s.WeightDType
	quantFrom := outer
	if !outer.has("quantization_config") {
		quantFrom = c
	}
	if !quantFrom.kvCacheOnly() {
		if s.Quant, err = quantFrom.quantization(); err != nil {
			return Shape{}, err
		}
	}
	if kv, scales, ok, err := quantFrom.kvCacheScheme(); err != nil {
		return Shape{}, err
	} else if ok {
		s.KVDType, s.KVScales = kv, scales
	}
	if err := s.Validate(); err != nil {
		return Shape{}, fmt.Errorf("model config %s: %w", source, err)
	}
	return s, nil
}

func joinLeftOut(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// notObject says what data holds instead of a JSON object, in a user's words rather than
// encoding/json's Go types.
func notObject(data []byte, err error) string {
	text := bytes.TrimSpace(data)
	var syntax *json.SyntaxError
	switch {
	case len(text) == 0:
		return "the file is empty"
	case errors.As(err, &syntax):
		return fmt.Sprintf("invalid JSON at byte %d: %v", syntax.Offset, err)
	case err != nil && json.Valid(text):
		kinds := map[byte]string{'[': "an array", '"': "a string", 't': "a boolean", 'f': "a boolean"}
		if kind, ok := kinds[text[0]]; ok {
			return "it holds " + kind
		}
		return "it holds a number"
	case err == nil:
		return "it holds null"
	}
	return err.Error()
}

// nearestModelTypes names the three supported model types nearest to name (by edit distance)
// and where the whole list is: one line, whatever the number of types.
func nearestModelTypes(name string) string {
	types := SupportedModelTypes()
	sort.SliceStable(types, func(i, j int) bool {
		return textdist.Levenshtein(name, types[i]) < textdist.Levenshtein(name, types[j])
	})
	return fmt.Sprintf("the nearest supported are %s (all %d: decodebench model show --help)", joinAnd(types[:min(3, len(types))]), len(types))
}

// SupportedModelTypes lists the model_type values a config.json may have, sorted; a multimodal
// wrapper whose text_config is read is named with "(its text_config)".
func SupportedModelTypes() []string {
	names := make([]string, 0, len(hfArchs)+len(hfWrappers))
	for name := range hfArchs {
		names = append(names, name)
	}
	for name := range hfWrappers {
		names = append(names, name+" (its text_config)")
	}
	sort.Strings(names)
	return names
}

func supportedModelTypes() string { return strings.Join(SupportedModelTypes(), ", ") }

// hfName is the model's name: _name_or_path when the file has one, else the
// folder holding config.json (for a Hugging Face cache snapshot,
// models--org--name/snapshots/<hash>/config.json, "org/name").
func hfName(c hfConfig, source string) string {
	if name, err := c.str("_name_or_path", ""); err == nil && name != "" && !strings.HasPrefix(name, "/") && !strings.HasPrefix(name, ".") {
		return name
	}
	dir := filepath.Dir(source)
	if filepath.Base(source) != "config.json" {
		return strings.TrimSuffix(filepath.Base(source), filepath.Ext(source))
	}
	if filepath.Base(filepath.Dir(dir)) == "snapshots" {
		repo := filepath.Base(filepath.Dir(filepath.Dir(dir)))
		if rest, ok := strings.CutPrefix(repo, "models--"); ok {
			return strings.ReplaceAll(rest, "--", "/")
		}
	}
	if base := filepath.Base(dir); base != "." && base != string(filepath.Separator) {
		return base
	}
	return "config.json"
}

// hfConfig reads typed fields out of a config.json, with errors that name the
// file, the field, its value and what is accepted.
type hfConfig struct {
	source string
	fields map[string]json.RawMessage
	within string // "text_config of llama4" for a nested config, named in errors
}

func (c hfConfig) errorf(format string, args ...any) error {
	if c.within != "" {
		return fmt.Errorf("model config %s (%s): "+format, append([]any{c.source, c.within}, args...)...)
	}
	return fmt.Errorf("model config %s: "+format, append([]any{c.source}, args...)...)
}

// has reports whether key is present and not null (transformers treats null as
// absent).
func (c hfConfig) has(key string) bool {
	raw, ok := c.fields[key]
	return ok && !bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// positiveInt reads a positive whole number; a missing key is an error when
// required, else def.
func (c hfConfig) positiveInt(key string, def int, required bool) (int, error) {
	if !c.has(key) {
		if required {
			return 0, c.errorf("%s is missing: a positive whole number is required", key)
		}
		return def, nil
	}
	text := string(bytes.TrimSpace(c.fields[key]))
	// Parsed as a float, as JSON numbers are, so that 4096.0 and 4.096e3 (which JSON writers
	// may produce) are read as 4096; a float64 holds every whole number up to MaxConfigValue
	// exactly. ParseFloat's range error gives ±Inf, which is too large (or negative) too.
	f, err := strconv.ParseFloat(text, 64)
	switch {
	case err != nil && !math.IsInf(f, 0), math.IsNaN(f), f != math.Trunc(f) && !math.IsInf(f, 0), f <= 0:
		return 0, c.errorf("%s = %s: must be a positive whole number", key, text)
	case f > MaxConfigValue:
		return 0, c.errorf("%s = %s is too large: at most %d", key, text, MaxConfigValue)
	}
	return int(f), nil
}

// MaxConfigValue is the largest size a config.json field may give: the kernels take sizes as
// 32-bit integers (kernels/decodebench.h), as the list flags do (axes.MaxValue).
const MaxConfigValue = math.MaxInt32

func (c hfConfig) boolean(key string, def bool) (bool, error) {
	if !c.has(key) {
		return def, nil
	}
	var b bool
	if err := json.Unmarshal(c.fields[key], &b); err != nil {
		return false, c.errorf("%s = %s: must be true or false", key, bytes.TrimSpace(c.fields[key]))
	}
	return b, nil
}

func (c hfConfig) str(key, def string) (string, error) {
	if !c.has(key) {
		return def, nil
	}
	var s string
	if err := json.Unmarshal(c.fields[key], &s); err != nil {
		return "", c.errorf("%s = %s: must be a string", key, bytes.TrimSpace(c.fields[key]))
	}
	return s, nil
}

// weightDType reads dtype (transformers >= 4.56) or torch_dtype.
func (c hfConfig) weightDType() (DType, error) {
	key := "torch_dtype"
	if c.has("dtype") {
		key = "dtype"
	}
	name, err := c.str(key, "bfloat16")
	if err != nil {
		return "", err
	}
	switch name {
	case "bfloat16":
		return BF16, nil
	case "float16":
		return FP16, nil
	case "float32":
		return FP32, nil
	}
	return "", c.errorf("%s = %q: accepted are bfloat16, float16, float32", key, name)
}
