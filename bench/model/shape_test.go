package model

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func mustLookup(t *testing.T, name string) Shape {
	t.Helper()
	s, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestValidate(t *testing.T) {
	llama := mustLookup(t, "llama3-8b")
	mixtral := mustLookup(t, "mixtral-8x7b")
	tests := []struct {
		desc    string
		edit    func(*Shape)
		base    Shape
		wantErr string // "" for valid
	}{
		{"preset is valid", func(*Shape) {}, llama, ""},
		{"MoE preset is valid", func(*Shape) {}, mixtral, ""},
		{"zero hidden", func(s *Shape) { s.Hidden = 0 }, llama, "Hidden = 0"},
		{"negative layers", func(s *Shape) { s.Layers = -1 }, llama, "Layers = -1"},
		{"zero head dim", func(s *Shape) { s.HeadDim = 0 }, llama, "HeadDim = 0"},
		{"zero vocab", func(s *Shape) { s.Vocab = 0 }, llama, "Vocab = 0"},
		{"zero TP", func(s *Shape) { s.TP = 0 }, llama, "TP = 0"},
		{"dense without FFN", func(s *Shape) { s.FFN = 0 }, llama, "FFN = 0"},
		{"uneven GQA", func(s *Shape) { s.KVHeads = 5 }, llama, "QHeads = 32 is not a multiple of KVHeads = 5"},
		{"unknown family", func(s *Shape) { s.Family = "bert" }, llama, `Family = "bert"`},
		{"empty weight dtype", func(s *Shape) { s.WeightDType = "" }, llama, `WeightDType = ""`},
		{"bad KV dtype", func(s *Shape) { s.KVDType = "int4" }, llama, `KVDType = "int4"`},
		{"expert fields on dense", func(s *Shape) { s.ExpertsPerToken = 2 }, llama, "Experts = 0"},
		{"k above E", func(s *Shape) { s.ExpertsPerToken = 9 }, mixtral, "ExpertsPerToken = 9"},
		{"MoE without expert width", func(s *Shape) { s.ExpertFFN = 0 }, mixtral, "ExpertFFN = 0"},
		{"negative FFN on MoE", func(s *Shape) { s.FFN = -1 }, mixtral, "FFN = -1"},
		{"MoE with a dense MLP too", func(s *Shape) { s.FFN = 1024 }, mixtral, ""},
	}
	for _, tc := range tests {
		s := tc.base
		tc.edit(&s)
		err := s.Validate()
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: unexpected error %v", tc.desc, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: error %v, want one containing %q", tc.desc, err, tc.wantErr)
		}
	}
}

func TestShard(t *testing.T) {
	llama70 := mustLookup(t, "llama3-70b")
	if got, err := llama70.Shard(1); err != nil || !reflect.DeepEqual(got, llama70) {
		t.Errorf("Shard(1) = %+v, %v; want the shape unchanged", got, err)
	}

	shard, err := llama70.Shard(8)
	if err != nil {
		t.Fatal(err)
	}
	want := llama70
	want.QHeads, want.KVHeads, want.FFN, want.Vocab, want.TP = 8, 1, 3584, 16032, 8
	if !reflect.DeepEqual(shard, want) {
		t.Errorf("Shard(8) = %+v\nwant %+v", shard, want)
	}
	// Eight shards hold the model plus seven extra copies of what is replicated:
	// norms (2 per layer + final), Hidden wide each.
	replicated := int64(2*llama70.Layers+1) * int64(llama70.Hidden)
	if got, want := 8*shard.ParamsTotal(), llama70.ParamsTotal()+7*replicated; got != want {
		t.Errorf("8 x shard params = %d, want %d", got, want)
	}
	if got, want := shard.KVBytesPerToken(), llama70.KVBytesPerToken()/8; got != want {
		t.Errorf("shard KV bytes per token = %g, want %g", got, want)
	}
	if !strings.Contains(shard.String(), "1/8") {
		t.Errorf("shard String() = %q, want it to say 1/8", shard)
	}

	// Sharding a shard composes.
	twice, err := llama70.Shard(2)
	if err == nil {
		twice, err = twice.Shard(4)
	}
	if err != nil || !reflect.DeepEqual(twice, shard) {
		t.Errorf("Shard(2).Shard(4) = %+v, %v; want Shard(8)", twice, err)
	}

	rejects := []struct {
		desc  string
		model string
		tp    int
		want  []string
	}{
		{"3 does not divide the heads", "llama3-70b", 3, []string{"degree 3", "64 query heads", "8 KV heads"}},
		{"16 exceeds the KV heads", "llama3-70b", 16, []string{"8 KV heads"}},
		{"zero", "llama3-70b", 0, []string{"degree 0"}},
		{"Mixtral expert width", "mixtral-8x7b", 3, []string{"expert MLP width 14336"}},
	}
	for _, tc := range rejects {
		_, err := mustLookup(t, tc.model).Shard(tc.tp)
		if err == nil {
			t.Errorf("%s: Shard(%d) succeeded", tc.desc, tc.tp)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", tc.desc, err, w)
			}
		}
	}
}

func TestShardVocabRoundsUp(t *testing.T) {
	s := mustLookup(t, "mistral-7b")
	s.Vocab = 32001
	shard, err := s.Shard(2)
	if err != nil || shard.Vocab != 16001 {
		t.Errorf("Shard(2) vocab = %d, %v; want ceil(32001/2) = 16001", shard.Vocab, err)
	}
}

// Shapes and kernels go into result records as JSON: they must read back equal.
func TestJSONRoundTrip(t *testing.T) {
	shard, err := mustLookup(t, "mixtral-8x7b").Shard(2)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range append(Presets(), shard) {
		data, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var back Shape
		if err := json.Unmarshal(data, &back); err != nil || !reflect.DeepEqual(back, s) {
			t.Errorf("%s: JSON %s read back as %+v, %v", s.Name, data, back, err)
		}
		kernels := s.Kernels(3, 100)
		data, err = json.Marshal(kernels)
		if err != nil {
			t.Fatal(err)
		}
		var kernelsBack []Kernel
		if err := json.Unmarshal(data, &kernelsBack); err != nil || !reflect.DeepEqual(kernelsBack, kernels) {
			t.Errorf("%s kernels: JSON %s read back as %+v, %v", s.Name, data, kernelsBack, err)
		}
	}
	data, _ := json.Marshal(mustLookup(t, "qwen2.5-7b"))
	for _, key := range []string{`"q_heads":28`, `"kv_heads":4`, `"attn_bias":true`, `"weight_dtype":"bf16"`} {
		if !strings.Contains(string(data), key) {
			t.Errorf("JSON %s lacks %s", data, key)
		}
	}
}
