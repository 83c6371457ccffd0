package ref

import (
	"runtime"
	"sync"
)

// table is a [rows x width] tensor of a hash fill that the forward pass never holds: a row is
// made from the hash when it is read, as db_fill_hash wrote it. The embedding and the LM head
// of a real vocabulary are a gigabyte of float32 each (Llama-3: 128256 x 4096).
type table struct {
	d     DType
	seed  uint64
	scale float32
	width int
}

// row fills buf (width long) with row j.
func (t table) row(j int, buf []float32) []float32 {
	base := uint64(j) * uint64(t.width)
	for i := range buf[:t.width] {
		buf[i] = FillValue(t.d, t.seed, t.scale, base+uint64(i))
	}
	return buf[:t.width]
}

// experts are one projection of a layer's experts, [experts x n x k]: a quantized format's
// codes held whole (expertProjection), a dense fill's rows made from the hash as each routed
// token reads them (a Mixtral layer's experts are 1.4G elements, a Qwen3-235B layer's 2.4G;
// a token uses its top k).
type experts struct {
	whole []float32
	n, k  int
	fill  table // rows of k: expert x is rows x*n .. (x+1)*n-1
}

func (f *Forward) newExperts(base uint64, layer int, name string, count, n, k int) *experts {
	if StepQuantized(f.shape, name) {
		return &experts{whole: f.expertProjection(base, layer, name, count, n, k), n: n, k: k}
	}
	return &experts{n: n, k: k, fill: table{d: f.d, seed: TensorSeed(base, layer, name), scale: LinearWeightScale(k), width: k}}
}

// expertLinear is f.linear of in by expert x of e.
func (f *Forward) expertLinear(in vec, e *experts, x int, bias []float32) vec {
	if e.whole != nil {
		return f.linear(in, e.whole[x*e.n*e.k:(x+1)*e.n*e.k], bias, e.n, e.k, true)
	}
	row := func(j int, buf []float32) []float32 { return e.fill.row(x*e.n+j, buf) }
	return f.linearRows(in, row, nil, bias, e.n, e.k, true)
}

// gather gives the rows of ids as a small table and each id's row in it, for Embedding.
func (t table) gather(ids []int32) (rows []float32, local []int32) {
	at := map[int32]int32{}
	local = make([]int32, len(ids))
	for b, id := range ids {
		r, ok := at[id]
		if !ok {
			r = int32(len(at))
			at[id] = r
			rows = append(rows, t.row(int(id), make([]float32, t.width))...)
		}
		local[b] = r
	}
	return rows, local
}

// parallelWork is the products under which one goroutine does the rows alone: the tiny
// models' linears are not worth a goroutine each.
const parallelWork = 1 << 22

// parallelRows runs work over [0, n) in one contiguous range a CPU when the products are
// many, else in one call.
func parallelRows(n, products int, work func(lo, hi int)) {
	cpus := runtime.GOMAXPROCS(0)
	if products < parallelWork || cpus < 2 || n < 2 {
		work(0, n)
		return
	}
	parts := min(cpus, n)
	var wg sync.WaitGroup
	for p := 0; p < parts; p++ {
		lo, hi := n*p/parts, n*(p+1)/parts
		wg.Add(1)
		go func() {
			defer wg.Done()
			work(lo, hi)
		}()
	}
	wg.Wait()
}
