package cgo

// #include "shim.h"
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

// DType is an element type of device buffers: the DB_DTYPE_* enum. Its values are the same as
// bench/ref's DType, so one converts to the other with a plain conversion.
type DType int32

const (
	DTypeF32  DType = C.DB_DTYPE_F32
	DTypeBF16 DType = C.DB_DTYPE_BF16
	DTypeFP16 DType = C.DB_DTYPE_FP16
	DTypeU32  DType = C.DB_DTYPE_U32
	// DTypeFP8E4M3 is an fp8 e4m3 KV cache (KVCache.DType): one byte an element.
	DTypeFP8E4M3 DType = C.DB_DTYPE_FP8_E4M3
)

// Bytes is the size of one element (0 for an unknown dtype).
func (t DType) Bytes() uint64 {
	switch t {
	case DTypeFP8E4M3:
		return 1
	case DTypeBF16, DTypeFP16:
		return 2
	case DTypeF32, DTypeU32:
		return 4
	}
	return 0
}

func (t DType) String() string {
	switch t {
	case DTypeF32:
		return "f32"
	case DTypeBF16:
		return "bf16"
	case DTypeFP16:
		return "fp16"
	case DTypeU32:
		return "u32"
	case DTypeFP8E4M3:
		return "fp8"
	}
	return fmt.Sprintf("dtype(%d)", int32(t))
}

// Buffer is device memory of one Device. Ptr is the device address the params structs take.
type Buffer struct {
	Ptr   uint64
	Bytes uint64

	dev   *Device
	once  sync.Once
	freed bool // read and written on the device goroutine only
}

// Alloc allocates bytes of device memory (not zeroed).
func (d *Device) Alloc(bytes uint64) (*Buffer, error) {
	if bytes == 0 {
		return nil, argError("db_buffer_alloc", "a buffer of 0 bytes")
	}
	b := &Buffer{Bytes: bytes, dev: d}
	err := d.Do(func() error {
		var ptr C.uint64_t
		if err := d.check("db_buffer_alloc", C.dbshim_buffer_alloc(d.lib.api, d.ctx, C.uint64_t(bytes), &ptr)); err != nil {
			return fmt.Errorf("allocating %d bytes: %w", bytes, err)
		}
		b.Ptr = uint64(ptr)
		if err := d.track(b); err != nil {
			C.dbshim_buffer_free(d.lib.api, d.ctx, ptr)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Close frees the buffer. It is safe to call twice, and after its device was closed (which
// freed it).
func (b *Buffer) Close() error {
	var err error
	b.once.Do(func() {
		err = b.dev.Do(func() error {
			if !b.dev.untrack(b) {
				return nil // the device's Close freed it
			}
			return b.free()
		})
		if err == ErrClosed {
			err = nil
		}
	})
	return err
}

func (b *Buffer) free() error {
	b.freed = true
	return b.dev.check("db_buffer_free", C.dbshim_buffer_free(b.dev.lib.api, b.dev.ctx, C.uint64_t(b.Ptr)))
}

// release is the device's Close freeing a buffer its owner left open.
func (b *Buffer) release() { _ = b.free() }

// fits checks that bytes from the start of the buffer lie inside it.
func (b *Buffer) fits(op string, bytes uint64) error {
	if bytes > b.Bytes {
		return argError(op, "%d bytes do not fit in a buffer of %d", bytes, b.Bytes)
	}
	return nil
}

// FillHash fills the first count elements with the input hash (db_fill_hash): element i is
// round_to_dtype(db_hash_uniform(seed, i) * scale) for float dtypes and db_hash64(seed, i) >> 32
// for DTypeU32. bench/ref reproduces it bit for bit.
func (b *Buffer) FillHash(dtype DType, count uint64, seed uint64, scale float32) error {
	const op = "db_fill_hash"
	if dtype.Bytes() == 0 {
		return argError(op, "unknown dtype %d", int32(dtype))
	}
	if count > b.Bytes/dtype.Bytes() {
		return argError(op, "%d elements of %v do not fit in a buffer of %d bytes", count, dtype, b.Bytes)
	}
	d := b.dev
	return d.Do(func() error {
		if b.freed {
			return ErrClosed
		}
		return d.check(op, C.dbshim_fill_hash(d.lib.api, d.ctx, C.uint64_t(b.Ptr), C.uint64_t(count),
			C.int32_t(dtype), C.uint64_t(seed), C.float(scale)))
	})
}

// Memset sets every byte of the buffer to value (0xFF poisons bf16, fp16 and f32 with NaN).
func (b *Buffer) Memset(value byte) error {
	d := b.dev
	return d.Do(func() error {
		if b.freed {
			return ErrClosed
		}
		return d.check("db_memset", C.dbshim_memset(d.lib.api, d.ctx, C.uint64_t(b.Ptr), C.int32_t(value), C.uint64_t(b.Bytes)))
	})
}

// CopyToHost copies the first len(dst) bytes of the buffer into dst.
func (b *Buffer) CopyToHost(dst []byte) error {
	const op = "db_copy_to_host"
	if err := b.fits(op, uint64(len(dst))); err != nil || len(dst) == 0 {
		return err
	}
	d := b.dev
	return d.Do(func() error {
		if b.freed {
			return ErrClosed
		}
		// dst is Go memory holding no Go pointers, passed only for this call.
		return d.check(op, C.dbshim_copy_to_host(d.lib.api, d.ctx, unsafe.Pointer(&dst[0]), C.uint64_t(b.Ptr), C.uint64_t(len(dst))))
	})
}

// CopyFromHost copies src into the first len(src) bytes of the buffer.
func (b *Buffer) CopyFromHost(src []byte) error {
	const op = "db_copy_to_device"
	if err := b.fits(op, uint64(len(src))); err != nil || len(src) == 0 {
		return err
	}
	d := b.dev
	return d.Do(func() error {
		if b.freed {
			return ErrClosed
		}
		return d.check(op, C.dbshim_copy_to_device(d.lib.api, d.ctx, C.uint64_t(b.Ptr), unsafe.Pointer(&src[0]), C.uint64_t(len(src))))
	})
}

// Element is a fixed-size number that Read and Write move without conversion (little-endian,
// as both the GPU and the emulator's host store it).
type Element interface {
	~uint8 | ~int8 | ~uint16 | ~int16 | ~uint32 | ~int32 | ~uint64 | ~int64 | ~float32 | ~float64
}

// asBytes views a slice of numbers as its bytes, for the length of one copy.
func asBytes[T Element](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

// Read copies the first len(dst) elements of b into dst: uint16 for bf16 and fp16 bits,
// float32, uint32 words, int32 indices.
func Read[T Element](b *Buffer, dst []T) error { return b.CopyToHost(asBytes(dst)) }

// Write copies src into the first len(src) elements of b.
func Write[T Element](b *Buffer, src []T) error { return b.CopyFromHost(asBytes(src)) }
