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
	// hidden/heads, so the file must state it; elsewhere hidden/heads.
	headDimRequired bool
	qkvBias         bool // Q, K and V always have a bias (Qwen2)
	readsBiasFlags  bool // attention_bias (Q, K, V and O) and mlp_bias are honoured
	moe             bool // num_local_experts and num_experts_per_tok (Mixtral)
	// window says which layers use sliding_window, as transformers' modeling code does.
	window windowRule
}

// windowRule is how a model type applies config.json's sliding_window.
type windowRule int

const (
	windowNone       windowRule = iota // full attention in every layer (Llama, Gemma)
	windowAllLayers                    // every layer, when sliding_window is set (Mistral, Mixtral, Phi-3)
	windowEveryOther                   // layers 0, 2, 4, ... (Gemma 2's local layers); default 4096
	windowQwen2                        // layers from max_window_layers on, when use_sliding_window
)

// hfArchs are the supported model_types. All have gated MLPs: SwiGLU, or GeGLU
// for Gemma (hidden_activation); Phi-3 fuses qkv_proj and gate_up_proj in its
// checkpoint but holds the same parameters.
var hfArchs = map[string]hfArch{
	"llama":   {kvHeadsFromHeads: true, readsBiasFlags: true},
	"mistral": {window: windowAllLayers},
	"mixtral": {moe: true, window: windowAllLayers},
	"qwen2":   {qkvBias: true, window: windowQwen2},
	"gemma":   {tiedByDefault: true, headDimRequired: true, readsBiasFlags: true},
	"gemma2":  {tiedByDefault: true, headDimRequired: true, readsBiasFlags: true, window: windowEveryOther},
	"phi3":    {kvHeadsFromHeads: true, window: windowAllLayers},
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
	data, err := os.ReadFile(path)
	if err != nil {
		return Shape{}, fmt.Errorf("reading model config: %w", err)
	}
	return ParseHFConfig(data, path)
}

// ParseHFConfig builds a Shape from the bytes of a Hugging Face config.json;
// source names the file in errors and becomes Shape.Source. The weight dtype is
// torch_dtype (or dtype, its name since transformers 4.56), bf16 when absent;
// an fp8 quantization_config makes it fp8. The KV cache takes the weight dtype,
// bf16 for fp8 weights.
func ParseHFConfig(data []byte, source string) (Shape, error) {
	c := hfConfig{source: source}
	if err := json.Unmarshal(data, &c.fields); err != nil || c.fields == nil {
		return Shape{}, fmt.Errorf("model config %s: not a JSON object: %s; want a Hugging Face config.json, {\"model_type\": ..., \"hidden_size\": ...}", source, notObject(data, err))
	}
	modelType, err := c.str("model_type", "")
	if err != nil {
		return Shape{}, err
	}
	arch, ok := hfArchs[modelType]
	if !ok {
		if modelType == "" {
			return Shape{}, c.errorf("model_type is missing: accepted are %s", supportedModelTypes())
		}
		return Shape{}, c.errorf("model_type %q is not supported: accepted are %s", modelType, supportedModelTypes())
	}
	s := Shape{Name: hfName(c, source), Family: modelType, GatedMLP: true, TP: 1, Source: source}

	ints := []struct {
		key string
		dst *int
	}{
		{"hidden_size", &s.Hidden}, {"intermediate_size", &s.FFN}, {"num_hidden_layers", &s.Layers},
		{"num_attention_heads", &s.QHeads}, {"vocab_size", &s.Vocab},
	}
	for _, f := range ints {
		if *f.dst, err = c.positiveInt(f.key, 0, true); err != nil {
			return Shape{}, err
		}
	}
	if !arch.kvHeadsFromHeads && !c.has("num_key_value_heads") {
		return Shape{}, c.errorf("num_key_value_heads is missing: %s configs must state it (transformers' default fits one checkpoint only)", modelType)
	}
	if arch.headDimRequired && !c.has("head_dim") {
		return Shape{}, c.errorf("head_dim is missing: %s configs must state it (transformers' default, 256, fits Gemma-7B only)", modelType)
	}
	if s.KVHeads, err = c.positiveInt("num_key_value_heads", s.QHeads, false); err != nil {
		return Shape{}, err
	}
	if s.QHeads%s.KVHeads != 0 {
		return Shape{}, c.errorf("num_attention_heads = %d is not a multiple of num_key_value_heads = %d", s.QHeads, s.KVHeads)
	}
	if !c.has("head_dim") && !arch.headDimRequired && s.Hidden%s.QHeads != 0 {
		return Shape{}, c.errorf("head_dim is missing and hidden_size = %d is not a multiple of num_attention_heads = %d", s.Hidden, s.QHeads)
	}
	if s.HeadDim, err = c.positiveInt("head_dim", s.Hidden/s.QHeads, false); err != nil {
		return Shape{}, err
	}
	if s.TiedEmbeddings, err = c.boolean("tie_word_embeddings", arch.tiedByDefault); err != nil {
		return Shape{}, err
	}
	s.AttnBias = arch.qkvBias
	if arch.readsBiasFlags {
		if s.AttnBias, err = c.boolean("attention_bias", false); err != nil {
			return Shape{}, err
		}
		s.OProjBias = s.AttnBias
		if s.MLPBias, err = c.boolean("mlp_bias", false); err != nil {
			return Shape{}, err
		}
	}
	if arch.moe {
		if s.Experts, err = c.positiveInt("num_local_experts", 0, true); err != nil {
			return Shape{}, err
		}
		if s.ExpertsPerToken, err = c.positiveInt("num_experts_per_tok", 0, true); err != nil {
			return Shape{}, err
		}
		if s.ExpertsPerToken > s.Experts {
			return Shape{}, c.errorf("num_experts_per_tok = %d exceeds num_local_experts = %d", s.ExpertsPerToken, s.Experts)
		}
		s.ExpertFFN, s.FFN = s.FFN, 0 // intermediate_size is each expert's width
	}
	if s.SlidingWindow, s.SlidingLayers, err = c.slidingWindow(arch.window, s.Layers); err != nil {
		return Shape{}, err
	}
	if s.WeightDType, err = c.weightDType(); err != nil {
		return Shape{}, err
	}
	s.KVDType = s.WeightDType
	if s.WeightDType == FP8 {
		s.KVDType = BF16
	}
	if err := s.Validate(); err != nil {
		return Shape{}, fmt.Errorf("model config %s: %w", source, err)
	}
	return s, nil
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

func supportedModelTypes() string {
	names := make([]string, 0, len(hfArchs))
	for name := range hfArchs {
		names = append(names, name)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

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
}

func (c hfConfig) errorf(format string, args ...any) error {
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

// weightDType reads dtype (transformers >= 4.56) or torch_dtype, and an fp8
// quantization_config. Other quantization methods store packed or grouped
// weights that one dtype cannot describe, so they are refused.
func (c hfConfig) weightDType() (DType, error) {
	if c.has("quantization_config") {
		var q struct {
			QuantMethod string `json:"quant_method"`
		}
		if err := json.Unmarshal(c.fields["quantization_config"], &q); err != nil {
			return "", c.errorf("quantization_config: not an object with a quant_method: %v", err)
		}
		if q.QuantMethod == "fp8" || q.QuantMethod == "fbgemm_fp8" {
			return FP8, nil
		}
		return "", c.errorf("quantization_config quant_method %q is not supported: accepted are fp8 and fbgemm_fp8; for other quantized checkpoints use the unquantized config.json and set the weight dtype", q.QuantMethod)
	}
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
