//go:build duckdb_arrow

package query

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
)

// refEncodeRLE encodes vals as a hybrid run sequence the plain way, value
// by value: runs of at least minRun equal values (when minRun > 0) as RLE
// runs, the rest bit-packed, 8 values a group (the last padded with
// zeros), in groups of at most maxGroups per run.
func refEncodeRLE(vals []uint32, width, minRun, maxGroups int) []byte {
	var out []byte
	header := func(h uint64) { out = binary.AppendUvarint(out, h) }
	var pending []uint32
	flush := func() {
		for len(pending) > 0 {
			groups := min((len(pending)+7)/8, maxGroups)
			n := min(len(pending), groups*8)
			header(uint64(groups)<<1 | 1)
			bits := make([]byte, groups*width)
			for i := range groups * 8 {
				var v uint32
				if i < n {
					v = pending[i]
				}
				for b := range width {
					if v>>b&1 == 1 {
						pos := i*width + b
						bits[pos/8] |= 1 << (pos % 8)
					}
				}
			}
			out = append(out, bits...)
			pending = pending[n:]
		}
	}
	for i := 0; i < len(vals); {
		j := i
		for j < len(vals) && vals[j] == vals[i] {
			j++
		}
		// Only a run starting at a group boundary of the pending values
		// can be RLE: bit-packed runs hold multiples of 8 values.
		if minRun > 0 && j-i >= minRun && len(pending)%8 == 0 {
			flush()
			header(uint64(j-i) << 1)
			for b := 0; b < (width+7)/8; b++ {
				out = append(out, byte(vals[i]>>(8*b)))
			}
			i = j
			continue
		}
		pending = append(pending, vals[i])
		i++
	}
	flush()
	return out
}

// refDecodeRLE decodes data bit by bit, to its end or the first error, as
// rleDecoder is meant to: a bit-packed run cut short gives the values
// that are whole. It stops after limit values (a run header may claim
// 2^31).
func refDecodeRLE(data []byte, width, limit int) ([]uint32, bool) {
	var out []uint32
	pos := 0
	for pos < len(data) && len(out) < limit {
		h, n := binary.Uvarint(data[pos:])
		if n <= 0 || h>>1 > 1<<31 {
			return out, false
		}
		pos += n
		if h&1 == 0 {
			nb := (width + 7) / 8
			if pos+nb > len(data) {
				return out, false
			}
			var v uint32
			for b := range nb {
				v |= uint32(data[pos+b]) << (8 * b)
			}
			pos += nb
			for range min(int(h>>1), limit-len(out)) {
				out = append(out, v)
			}
			continue
		}
		groups := int(h >> 1)
		count := groups * 8
		if width > 0 {
			count = min(count, (len(data)-pos)*8/width)
		}
		if count == 0 && groups > 0 {
			return out, false
		}
		for i := range min(count, limit-len(out)) {
			var v uint32
			for b := range width {
				bit := (pos*8 + i*width + b)
				if data[bit/8]>>(bit%8)&1 == 1 {
					v |= 1 << b
				}
			}
			out = append(out, v)
		}
		pos = min(pos+groups*width, len(data))
	}
	return out[:min(len(out), limit)], true
}

// decodeAll reads d to its end or limit values in pieces of random sizes,
// some skipped (marked in skipped) and some read as one run when they are.
func decodeAll(t testing.TB, d *rleDecoder, rng *rand.Rand, limit int) (out []uint32, skipped []bool, ok bool) {
	buf := make([]uint32, 5000)
	for len(out) < limit {
		k := 1 + rng.IntN(min(len(buf), limit-len(out)))
		switch rng.IntN(8) {
		case 0:
			got, err := d.skip(k)
			for range got {
				out = append(out, 0)
				skipped = append(skipped, true)
			}
			if err != nil {
				return out, skipped, false
			}
			if got < k {
				return out, skipped, true
			}
			continue
		case 1:
			if v, ok, err := d.run(k); err != nil {
				return out, skipped, false
			} else if ok {
				for range k {
					out = append(out, v)
					skipped = append(skipped, false)
				}
				continue
			}
		}
		got, err := d.decode(buf[:k])
		out = append(out, buf[:got]...)
		skipped = append(skipped, make([]bool, got)...)
		if err != nil {
			return out, skipped, false
		}
		if got < k {
			return out, skipped, true
		}
	}
	return out, skipped, true
}

// sameDecoded compares what decodeAll read with want, but for the values
// it skipped.
func sameDecoded(got []uint32, skipped []bool, want []uint32) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] && !skipped[i] {
			return false
		}
	}
	return true
}

func TestRLEDecoderRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var d rleDecoder
	for iter := range 3000 {
		width := iter % 33
		if iter%3 == 0 {
			width = 1 + rng.IntN(20) // the widths that matter most
		}
		n := rng.IntN(20000)
		if iter%10 == 0 {
			n = rng.IntN(20)
		}
		vals := make([]uint32, n)
		limit := uint64(1) << width
		runny := rng.IntN(3)
		for i := range vals {
			switch {
			case i > 0 && runny > 0 && rng.IntN(100) < 90:
				vals[i] = vals[i-1]
			default:
				vals[i] = uint32(rng.Uint64N(limit))
			}
		}
		minRun := []int{0, 1, 8, 30}[rng.IntN(4)]
		enc := refEncodeRLE(vals, width, minRun, 1+rng.IntN(100))
		ref, ok := refDecodeRLE(enc, width, 1<<30)
		if !ok || len(ref) < n || !slices.Equal(ref[:n], vals) {
			t.Fatalf("width %d: the reference does not round-trip", width)
		}
		d.reset(enc, width)
		got, skipped, ok := decodeAll(t, &d, rng, 1<<30)
		if !ok || !sameDecoded(got, skipped, ref) {
			t.Fatalf("width %d, %d values, minRun %d: decoded %d values (ok %v), want %d", width, n, minRun, len(got), ok, len(ref))
		}
		// All at once, exactly the values written.
		d.reset(enc, width)
		all := make([]uint32, n)
		if k, err := d.decode(all); k != n || err != nil || !slices.Equal(all, vals) {
			t.Fatalf("width %d: decode all: %d values, %v", width, k, err)
		}
	}
}

func FuzzRLEDecoder(f *testing.F) {
	f.Add([]byte{0x03, 0xff, 0x00}, uint8(1), uint64(1))
	f.Add(refEncodeRLE([]uint32{1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 3, 4}, 3, 4, 2), uint8(3), uint64(7))
	f.Add(refEncodeRLE([]uint32{1000, 5, 5, 5, 5, 5, 5, 5, 5, 5, 17}, 10, 8, 1), uint8(10), uint64(9))
	f.Fuzz(func(t *testing.T, data []byte, w uint8, seed uint64) {
		width := int(w % 33)
		const limit = 1 << 16
		want, wantOK := refDecodeRLE(data, width, limit)
		var d rleDecoder
		d.reset(data, width)
		got, skipped, ok := decodeAll(t, &d, rand.New(rand.NewPCG(seed, 0)), limit)
		if ok != wantOK || !sameDecoded(got, skipped, want) {
			t.Fatalf("decoded %d values (ok %v), the reference %d (ok %v)", len(got), ok, len(want), wantOK)
		}
	})
}

func BenchmarkRLEDecoder(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, width := range []int{1, 4, 10, 17} {
		vals := make([]uint32, 1<<16)
		for i := range vals {
			vals[i] = uint32(rng.Uint64N(1 << width))
		}
		enc := refEncodeRLE(vals, width, 0, 1<<20)
		b.Run("width"+string(rune('0'+width/10))+string(rune('0'+width%10)), func(b *testing.B) {
			dst := make([]uint32, vectorSize)
			var d rleDecoder
			b.SetBytes(int64(len(vals)) * 4)
			for b.Loop() {
				d.reset(enc, width)
				for {
					if n, _ := d.decode(dst); n < len(dst) {
						break
					}
				}
			}
		})
	}
}
