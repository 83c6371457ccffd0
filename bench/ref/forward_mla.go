package ref

import (
	"math"

	"github.com/decodebench/decodebench/cgo"
)

// The forward pass of multi-head latent attention (DeepSeek-V3, Kimi-K2) in the absorbed form
// the engine runs (bench/step/mla.go), each stored value rounded where its kernel stores it:
//
//	q_b  = (rmsnorm(a q_a^T) * q_a_norm) q_b^T   (a q^T without q_lora_rank)
//	kv_a = a kv_a^T                               [latent 512 | k_pe 64]
//	q[b, h] = [ q_b[b, h, :nope] w_uk[h]^T | rope(q_b[b, h, nope:]) ]          576
//	cache[b, pos] = [ rmsnorm(kv_a[b, :512]) * kv_a_norm | rope(kv_a[b, 512:]) ]
//	o[b, h] = the first 512 of attention(q[b, h], cache rows as keys and values), scale
//	          MLASoftmaxScale
//	y = [o[b, h] w_uv[h]^T for each h] o^T

// mlaWeights are one MLA layer's weights beyond layerWeights' norms and o.
type mlaWeights struct {
	qA, qANorm, qB []float32 // qB is TensorQ (from the hidden state) without q_lora_rank
	kvA, kvANorm   []float32
	wUK, wUV       []float32
}

// mlaLayerElements counts one MLA layer's attention weights and latent cache.
func (f *Forward) mlaLayerElements() int64 {
	s := f.shape
	h, heads, qh := int64(s.Hidden), int64(s.QHeads), int64(s.HeadDim)
	latent, rope, nope, vd := int64(s.KVLoRARank), int64(s.RoPEHeadDim), int64(s.QKNopeHeadDim()), int64(s.VHeadDim)
	n := (latent+rope)*h + heads*(latent*nope+vd*latent) + h*heads*vd
	if r := int64(s.QLoRARank); r > 0 {
		n += r*h + heads*qh*r
	} else {
		n += heads * qh * h
	}
	return n + int64(f.batch)*int64(f.capacity)*(latent+rope)
}

// fillMLA generates layer l's MLA weights into w and its latent cache.
func (f *Forward) fillMLA(w *layerWeights, l int, get func(layer int, name string, scale float32, n int) []float32) {
	s := f.shape
	h, heads, qh := s.Hidden, s.QHeads, s.HeadDim
	latent, rope, nope, vd := s.KVLoRARank, s.RoPEHeadDim, s.QKNopeHeadDim(), s.VHeadDim
	m := &mlaWeights{}
	if r := s.QLoRARank; r > 0 {
		m.qA = get(l, TensorQA, LinearWeightScale(h), r*h)
		m.qANorm = get(l, TensorQANorm, UnitScale, r)
		m.qB = get(l, TensorQB, LinearWeightScale(r), heads*qh*r)
	} else {
		m.qB = get(l, TensorQ, LinearWeightScale(h), heads*qh*h)
	}
	m.kvA = get(l, TensorKVA, LinearWeightScale(h), (latent+rope)*h)
	m.kvANorm = get(l, TensorKVANorm, UnitScale, latent)
	m.wUK = get(l, TensorWUK, LinearWeightScale(nope), heads*latent*nope)
	m.wUV = get(l, TensorWUV, LinearWeightScale(latent), heads*vd*latent)
	w.mla = m
	w.o = get(l, TensorO, LinearWeightScale(heads*vd), h*heads*vd)
	f.latent = append(f.latent, get(l, TensorLatentCache, CacheScale, f.batch*f.capacity*cgo.MLAQKDim))
	f.latentSigma = append(f.latentSigma, make([]float64, f.batch*f.steps*cgo.MLAQKDim))
}

// slice gathers, from rows of width, the columns [at, at+n) of every row into rows of n.
func (v vec) slice(width, at, n int) vec {
	rows := len(v.v) / width
	out := newVec(rows * n)
	for r := 0; r < rows; r++ {
		copy(out.v[r*n:], v.v[r*width+at:r*width+at+n])
		copy(out.s[r*n:], v.s[r*width+at:r*width+at+n])
	}
	return out
}

// place writes rows of n from src into columns [at, at+n) of dst's rows of width.
func (v vec) place(src vec, width, at, n int) {
	for r := 0; r < len(src.v)/n; r++ {
		copy(v.v[r*width+at:], src.v[r*n:(r+1)*n])
		copy(v.s[r*width+at:], src.s[r*n:(r+1)*n])
	}
}

// mlaAttention is layer l's attention from the normed input a to o_proj's output, the step's
// token appended to the latent cache at pos.
func (f *Forward) mlaAttention(l int, a vec, pos int) vec {
	s, w := f.shape, f.layers[l]
	m := w.mla
	h, heads, qh := f.hidden, s.QHeads, s.HeadDim
	nope, vd := s.QKNopeHeadDim(), s.VHeadDim
	latent, rope, qk := cgo.MLALatentDim, cgo.MLARoPEDim, cgo.MLAQKDim
	var qb vec
	if r := s.QLoRARank; r > 0 {
		qa := f.linear(a, m.qA, nil, r, h, false)
		qan, _ := f.rmsnorm(qa, nil, m.qANorm, r)
		qb = f.linear(qan, m.qB, nil, heads*qh, r, false)
	} else {
		qb = f.linear(a, m.qB, nil, heads*qh, h, false)
	}
	kva := f.linear(a, m.kvA, nil, latent+rope, h, false)
	mlaRope := Rope{Theta: StepRopeTheta, Scaling: RopeDefault, RotaryDim: rope}

	// q [batch, heads, 576]: the absorbed q_nope (one grouped-linear group a head), then q_pe rotated.
	q := newVec(f.batch * heads * qk)
	for hd := 0; hd < heads; hd++ {
		rows := qb.slice(heads*qh, hd*qh, qh) // [batch, nope + rope] of head hd
		qLatent := f.linear(rows.slice(qh, 0, nope), m.wUK[hd*latent*nope:(hd+1)*latent*nope], nil, latent, nope, false)
		qPE := f.ropeRowsOf(rows.slice(qh, nope, rope), mlaRope, rope, pos)
		q.place(qLatent, heads*qk, hd*qk, latent)
		q.place(qPE, heads*qk, hd*qk+latent, rope)
	}
	// The new latent row, appended at pos.
	cLatent, _ := f.rmsnorm(kva.slice(latent+rope, 0, latent), nil, m.kvANorm, latent)
	kPE := f.ropeRowsOf(kva.slice(latent+rope, latent, rope), mlaRope, rope, pos)
	for b := 0; b < f.batch; b++ {
		dst := (b*f.capacity + pos) * qk
		so := (b*f.steps + f.step) * qk
		copy(f.latent[l][dst:], cLatent.v[b*latent:(b+1)*latent])
		copy(f.latent[l][dst+latent:], kPE.v[b*rope:(b+1)*rope])
		copy(f.latentSigma[l][so:], cLatent.s[b*latent:(b+1)*latent])
		copy(f.latentSigma[l][so+latent:], kPE.s[b*rope:(b+1)*rope])
	}
	// Every head over its sequence's latent rows, the rows serving as keys and (their first
	// 512) values: attended 576 wide, as bench/ref's MLA reference does, then cut to 512.
	L := f.context + f.step + 1
	rows := f.batch * heads
	want, kernel, in := make([]float64, rows*latent), make([]float64, rows*latent), make([]float64, rows*latent)
	for b := 0; b < f.batch; b++ {
		kv := func(t int) (k, v []float32, ks, vs []float64) {
			o := (b*f.capacity + t) * qk
			k = f.latent[l][o : o+qk]
			if t >= f.context {
				so := (b*f.steps + t - f.context) * qk
				ks = f.latentSigma[l][so : so+qk]
			}
			return k, k, ks, ks
		}
		for hd := 0; hd < heads; hd++ {
			row := b*heads + hd
			a, k, sg := f.attendHead(q.v[row*qk:(row+1)*qk], q.s[row*qk:(row+1)*qk], kv, 0, L, nil)
			copy(want[row*latent:], a[:latent])
			copy(kernel[row*latent:], k[:latent])
			copy(in[row*latent:], sg[:latent])
		}
	}
	o := f.store(want, kernel, in) // [batch, heads, 512]
	v := newVec(f.batch * heads * vd)
	for hd := 0; hd < heads; hd++ {
		vh := f.linear(o.slice(heads*latent, hd*latent, latent), m.wUV[hd*vd*latent:(hd+1)*vd*latent], nil, vd, latent, false)
		v.place(vh, heads*vd, hd*vd, vd)
	}
	return f.linear(v, w.o, nil, h, heads*vd, false)
}

// attnScale is the softmax scale of the model's attention.
func (f *Forward) attnScale() float64 {
	if f.shape.IsMLA() {
		return MLASoftmaxScale(f.shape)
	}
	return 1 / math.Sqrt(float64(f.headDim))
}
