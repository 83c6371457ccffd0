package sweep

import (
	"fmt"
	"strings"

	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/cgo"
)

// The weight formats by name (--weight-dtype on every command) and the model shape each one
// sets. The table is here because this is the one package that sees
// both halves of a format: the names and buffer layouts of the kernels (cgo) and the
// quantization_config a checkpoint would carry (bench/model.Quantization), whose bytes predict
// and model show price. A name sets the Shape exactly as its quantization_config would, so the
// bytes priced, the kernels measured and the step run follow from the Shape alone; WeightFormatOf
// reads the Shape back, and every name of the table round-trips through the two.

// WeightDType is one --weight-dtype choice: a format name and, for the grouped formats (int4,
// int4-zp, mxfp4), the weights along K per scale (0 for the others).
type WeightDType struct {
	Name      string
	GroupSize int
}

// WeightDTypeNames are the accepted names, in the order help texts list them: the dense
// dtypes, then the kernels' quantized formats (cgo, DB_WEIGHT_*).
func WeightDTypeNames() []string {
	names := []string{string(model.BF16), string(model.FP16)}
	for _, f := range quantizedFormats {
		names = append(names, f.String())
	}
	return names
}

// quantizedFormats are the DB_WEIGHT_* formats that have a name, in cgo's order. A new format
// of the kernels (fp8 with 128x128 block scales, say) is one more entry here, one more case
// in quantizationOf, and its inverse in bench/ref's WeightFormatOf (the one mapping from a
// Shape to a kernel format, there because the decode step, which this package imports, reads it too).
var quantizedFormats = []cgo.WeightFormat{cgo.WeightFP8, cgo.WeightFP8Tensor, cgo.WeightFP8Block, cgo.WeightINT8, cgo.WeightINT4,
	cgo.WeightINT4ZeroPt, cgo.WeightMXFP4}

// quantizationOf is the quantization_config a checkpoint in format f (groups of group) has:
// fp8 is fbgemm_fp8's per-channel e4m3, int4 gptq's 4-bit groups (qzeros stored, no desc_act),
// int4-zp awq's, mxfp4 gpt-oss's. Every projection is quantized (no modules_to_not_convert).
func quantizationOf(f cgo.WeightFormat, group int) *model.Quantization {
	switch f {
	case cgo.WeightFP8:
		return &model.Quantization{Method: model.QuantFP8, Bits: 8}
	case cgo.WeightFP8Tensor:
		return &model.Quantization{Method: model.QuantFP8, Bits: 8, PerTensor: true}
	case cgo.WeightFP8Block:
		return &model.Quantization{Method: model.QuantFP8, Bits: 8, BlockN: cgo.FP8Block, BlockK: cgo.FP8Block}
	case cgo.WeightINT8:
		return &model.Quantization{Method: model.QuantINT8, Bits: 8}
	case cgo.WeightINT4:
		return &model.Quantization{Method: model.QuantGPTQ, Bits: 4, GroupSize: group, Zeros: true}
	case cgo.WeightINT4ZeroPt:
		return &model.Quantization{Method: model.QuantAWQ, Bits: 4, GroupSize: group, Zeros: true}
	case cgo.WeightMXFP4:
		return &model.Quantization{Method: model.QuantMXFP4, Bits: 4, GroupSize: cgo.MXFP4Group}
	}
	return nil
}

// ParseWeightDType reads a --weight-dtype name and --group-size (groupGiven: the flag was
// set). A grouped format without a group takes its default (int4: 128, mxfp4: 32); a group on
// a format without groups, or one the format never takes, is refused naming both.
func ParseWeightDType(name string, group int, groupGiven bool) (WeightDType, error) {
	name = strings.ToLower(strings.TrimSpace(name))
	f, _, err := cgo.ParseWeightDType(name)
	if err != nil {
		return WeightDType{}, fmt.Errorf("unknown weight format %q: accepted are %s", name, strings.Join(WeightDTypeNames(), ", "))
	}
	switch {
	case !f.Grouped() && groupGiven:
		what := name + " weights have one scale per output channel (or tensor), no groups"
		if f == cgo.WeightFP8Block {
			what = name + " weights have one scale per 128x128 tile, no groups along K alone"
		}
		if f == cgo.WeightDense {
			what = "dense " + name + " weights have no groups"
		}
		return WeightDType{}, fmt.Errorf("--group-size %d with --weight-dtype %s: %s (groups go with int4, int4-zp and mxfp4)", group, name, what)
	case !f.Grouped():
		return WeightDType{Name: name}, nil
	case !groupGiven:
		group = f.DefaultGroupSize()
	}
	// The shape-free half of the format's rule (which groups it takes); CheckShape checks each
	// linear's K.
	if err := f.CheckShape(2, 128*cgo.MXFP4Group, group); err != nil {
		return WeightDType{}, fmt.Errorf("--group-size %d with --weight-dtype %s: %v", group, name, err)
	}
	return WeightDType{Name: name, GroupSize: group}, nil
}

// Format is the kernels' format of w (WeightDense for bf16 and fp16).
func (w WeightDType) Format() cgo.WeightFormat {
	f, _, _ := cgo.ParseWeightDType(w.Name)
	return f
}

// String is the name with its group: "int4 g64", "fp8", "bf16", "mxfp4" (its only group).
func (w WeightDType) String() string {
	if w.GroupSize > 0 && w.Format() != cgo.WeightMXFP4 {
		return fmt.Sprintf("%s g%d", w.Name, w.GroupSize)
	}
	return w.Name
}

// Apply stores s's weights in w, as a checkpoint with w's quantization_config would: bf16 or
// fp16 make every weight that dtype and drop a checkpoint's quantization; a quantized format
// stores every projection in it, while the embedding, LM head, router and norms keep the 16-bit
// dtype (the model's, or bf16 where the model's weights were 8-bit).
func (w WeightDType) Apply(s model.Shape) model.Shape {
	f := w.Format()
	if f == cgo.WeightDense {
		s.WeightDType, s.Quant = model.DType(w.Name), nil
		return s
	}
	s.WeightDType, s.Quant = s.ActivationDType(), quantizationOf(f, w.GroupSize)
	return s
}

// WeightDTypeOf is Apply's inverse: the name s's projections are stored in. ok is false for a
// quantization the kernels have no format for (fp8 with block scales, 8-bit gptq, ...), and
// for dense weights other than bf16 and fp16.
func WeightDTypeOf(s model.Shape) (w WeightDType, ok bool) {
	if s.Quant == nil {
		name := string(s.WeightDType)
		return WeightDType{Name: name}, s.WeightDType == model.BF16 || s.WeightDType == model.FP16
	}
	f, group, ok := WeightFormatOf(s)
	if !ok {
		return WeightDType{}, false
	}
	if !f.Grouped() {
		group = 0
	}
	return WeightDType{Name: f.String(), GroupSize: group}, true
}

// WeightDTypeLabel names s's weight format for a table or a legend: the --weight-dtype name
// ("int4 g64"), or the checkpoint's format where no name has it ("fp8 (128x128 block scales)").
func WeightDTypeLabel(s model.Shape) string {
	if w, ok := WeightDTypeOf(s); ok {
		return w.String()
	}
	if s.Quant != nil {
		return s.Quant.String()
	}
	return string(s.WeightDType)
}

// CheckShape says which linear of s, if any, its quantized format cannot store: "down_proj (N
// 4096, K 14336): k 14336 is not a multiple of int4's group size 128 ...". Dense weights and
// quantizations without a kernel format pass (the sweep names those missing).
func CheckShape(s model.Shape) error {
	f, group, ok := WeightFormatOf(s)
	if !ok {
		return nil
	}
	for _, k := range s.Kernels(1, 1) {
		if k.Kind != model.KindLinear || k.WeightFormat == "" {
			continue
		}
		if err := f.CheckShape(k.N, k.K, group); err != nil {
			return fmt.Errorf("%s (N %d, K %d): %v", k.Name, k.N, k.K, err)
		}
	}
	return nil
}

// NamedByFormat names s by its model and weight format, "Llama-3-8B (int4 g128)": a run that
// compares formats has one model per format, and their names (report sections, chart files)
// must differ. FormatFamily reads the model's part back.
func NamedByFormat(s model.Shape) model.Shape {
	s.Name += " (" + WeightDTypeLabel(s) + ")"
	return s
}

// FormatFamily is the key shared by the shapes of one model that differ only in the weight
// format (NamedByFormat's, the dense dtype, the quantization): the runs a per-format chart
// compares.
func FormatFamily(s model.Shape) string {
	s.Name = strings.TrimSuffix(s.Name, " ("+WeightDTypeLabel(s)+")")
	s.WeightDType, s.Quant = "", nil
	return ModelKey(s)
}
