//go:build duckdb_arrow

package query

import (
	"encoding/binary"
	"errors"
)

// errRLE is what a malformed RLE / bit-packed run sequence gives.
var errRLE = errors.New("corrupt RLE / bit-packed data")

// rleDecoder reads Parquet's RLE / bit-packing hybrid encoding (definition
// levels, dictionary indices): runs of one repeated value and runs of
// values packed width bits each, least significant bit first, 8 at a time.
// arrow-go has one, but internal to its module.
type rleDecoder struct {
	data  []byte
	pos   int // the next run's header
	width uint
	mask  uint64
	// The run being read: repeat values of value left, or packed values
	// left of the bit-packed run whose next value starts at bit bit of
	// data.
	repeat int
	value  uint32
	packed int
	bit    int
	runBit int // where the bit-packed run starts
}

// reset starts reading data, of values width bits wide (0 to 32).
func (d *rleDecoder) reset(data []byte, width int) {
	*d = rleDecoder{data: data, width: uint(width), mask: 1<<uint(width) - 1}
}

// nextRun reads the next run's header; false at the end of the data.
func (d *rleDecoder) nextRun() (bool, error) {
	if d.pos >= len(d.data) {
		return false, nil
	}
	h, n := binary.Uvarint(d.data[d.pos:])
	if n <= 0 || h>>1 > 1<<31 {
		return false, errRLE
	}
	d.pos += n
	if h&1 == 0 {
		// The value follows in as few bytes as its width needs.
		nb := int(d.width+7) / 8
		if d.pos+nb > len(d.data) {
			return false, errRLE
		}
		var v uint32
		for i := range nb {
			v |= uint32(d.data[d.pos+i]) << (8 * i)
		}
		d.pos += nb
		d.repeat, d.value = int(h>>1), v
		if d.repeat == 0 {
			return d.nextRun()
		}
		return true, nil
	}
	groups := int(h >> 1)
	bytes := groups * int(d.width)
	// A last run may be cut short of its groups' padding.
	d.packed = groups * 8
	if d.width > 0 {
		d.packed = min(d.packed, (len(d.data)-d.pos)*8/int(d.width))
	}
	d.bit = d.pos * 8
	d.runBit = d.bit
	d.pos = min(d.pos+bytes, len(d.data))
	if d.packed == 0 {
		if groups == 0 {
			return d.nextRun()
		}
		return false, errRLE
	}
	return true, nil
}

// decode fills dst with the next values; it returns fewer than len(dst)
// only at the end of the data.
func (d *rleDecoder) decode(dst []uint32) (int, error) {
	n := 0
	for n < len(dst) {
		switch {
		case d.repeat > 0:
			k := min(d.repeat, len(dst)-n)
			fillUint32(dst[n:n+k], d.value)
			d.repeat -= k
			n += k
		case d.packed > 0:
			k := min(d.packed, len(dst)-n)
			d.unpack(dst[n : n+k])
			d.packed -= k
			n += k
		default:
			ok, err := d.nextRun()
			if err != nil {
				return n, err
			}
			if !ok {
				return n, nil
			}
		}
	}
	return n, nil
}

// skip passes over the next n values; it returns fewer only at the end.
func (d *rleDecoder) skip(n int) (int, error) {
	done := 0
	for done < n {
		switch {
		case d.repeat > 0:
			k := min(d.repeat, n-done)
			d.repeat -= k
			done += k
		case d.packed > 0:
			k := min(d.packed, n-done)
			d.packed -= k
			d.bit += k * int(d.width)
			done += k
		default:
			ok, err := d.nextRun()
			if err != nil {
				return done, err
			}
			if !ok {
				return done, nil
			}
		}
	}
	return done, nil
}

// current returns the run being read, starting the next one if it is
// done: its value and the values left of it for an RLE run, 0 left for a
// bit-packed run or at the end.
func (d *rleDecoder) current() (value uint32, left int, err error) {
	if d.repeat == 0 && d.packed == 0 {
		if _, err := d.nextRun(); err != nil {
			return 0, 0, err
		}
	}
	return d.value, d.repeat, nil
}

// run returns the value of the next n values when they are all one RLE
// run's, consuming them; false (consuming nothing) otherwise.
func (d *rleDecoder) run(n int) (uint32, bool, error) {
	if d.repeat == 0 && d.packed == 0 {
		if _, err := d.nextRun(); err != nil {
			return 0, false, err
		}
	}
	if d.repeat >= n {
		d.repeat -= n
		return d.value, true, nil
	}
	return 0, false, nil
}

// unpack decodes len(dst) values of the current bit-packed run. The run
// starts on a byte and each group of 8 values is width bytes, so whole
// groups are decoded from one or two 8-byte loads (width <= 16) or one load
// per value (wider); values before the first whole group, after the last
// one or within 8 bytes of the end of the data are read one by one.
func (d *rleDecoder) unpack(dst []uint32) {
	data, w, bit := d.data, int(d.width), d.bit
	if w == 0 {
		clear(dst)
		return
	}
	m := d.mask
	i := 0
	for ; i < len(dst) && (bit-d.runBit)%(8*w) != 0; i++ {
		dst[i] = uint32(d.at(bit))
		bit += w
	}
	if groups := (len(dst) - i) / 8; groups > 0 {
		// Group g is whole and within 8 bytes of loads from its start
		// when its start is at most len(data)-w-8 (loads reach at most
		// w-1+8 bytes past it, w wide).
		start := bit >> 3
		if room := len(data) - 8 - w - start; room < 0 {
			groups = 0
		} else {
			groups = min(groups, room/w+1)
		}
		switch {
		case w <= 8:
			unpack8(dst[i:i+groups*8], data[start:], w, m)
		case w <= 16:
			unpack16(dst[i:i+groups*8], data[start:], w, m)
		default:
			unpack32(dst[i:i+groups*8], data[start:], w, m)
		}
		start += groups * w
		i += groups * 8
		bit = start * 8
	}
	for ; i < len(dst); i++ {
		dst[i] = uint32(d.at(bit))
		bit += w
	}
	d.bit = bit
}

// unpack8 decodes len(dst)/8 whole groups of values at most 8 bits wide
// from data, which has 8 bytes to load at each group's start. (Shift
// counts are masked so that the compiler need not handle counts past 63.)
func unpack8(dst []uint32, data []byte, w int, m uint64) {
	w1, w2, w3, w4, w5, w6, w7 := uint(w)&63, uint(2*w)&63, uint(3*w)&63, uint(4*w)&63, uint(5*w)&63, uint(6*w)&63, uint(7*w)&63
	for len(dst) >= 8 && len(data) >= 8 {
		x := binary.LittleEndian.Uint64(data)
		out := dst[:8:8]
		out[0] = uint32(x & m)
		out[1] = uint32(x >> w1 & m)
		out[2] = uint32(x >> w2 & m)
		out[3] = uint32(x >> w3 & m)
		out[4] = uint32(x >> w4 & m)
		out[5] = uint32(x >> w5 & m)
		out[6] = uint32(x >> w6 & m)
		out[7] = uint32(x >> w7 & m)
		dst, data = dst[8:], data[w:]
	}
}

// unpack16 is unpack8 for widths 9 to 16: values 0-3 are within the
// group's first 8 bytes, 4-7 within the 8 bytes from bit 4*w (at most 4
// bits into a byte: 4+4*15 fits, and 4*16 starts on one).
func unpack16(dst []uint32, data []byte, w int, m uint64) {
	w1, w2, w3 := uint(w)&63, uint(2*w)&63, uint(3*w)&63
	half, sh := (4*w)>>3, uint(4*w)&7
	for len(dst) >= 8 && len(data) >= half+8 {
		x := binary.LittleEndian.Uint64(data)
		y := binary.LittleEndian.Uint64(data[half:]) >> sh
		out := dst[:8:8]
		out[0] = uint32(x & m)
		out[1] = uint32(x >> w1 & m)
		out[2] = uint32(x >> w2 & m)
		out[3] = uint32(x >> w3 & m)
		out[4] = uint32(y & m)
		out[5] = uint32(y >> w1 & m)
		out[6] = uint32(y >> w2 & m)
		out[7] = uint32(y >> w3 & m)
		dst, data = dst[8:], data[w:]
	}
}

// unpack32 is unpack8 for widths 17 to 32: a load per value, from the
// value's first byte (at most 7 bits in, 7+32 fits).
func unpack32(dst []uint32, data []byte, w int, m uint64) {
	var off [8]int
	var sh [8]uint
	for j := range 8 {
		off[j], sh[j] = (j*w)>>3, uint(j*w)&7
	}
	for len(dst) >= 8 && len(data) >= off[7]+8 {
		out := dst[:8:8]
		for j := range 8 {
			out[j] = uint32(binary.LittleEndian.Uint64(data[off[j]:]) >> sh[j] & m)
		}
		dst, data = dst[8:], data[w:]
	}
}

// at is the value at bit of the data.
func (d *rleDecoder) at(bit int) uint64 {
	var v uint64
	if b := bit >> 3; b+8 <= len(d.data) {
		v = binary.LittleEndian.Uint64(d.data[b:])
	} else {
		for j, c := range d.data[b:] {
			v |= uint64(c) << (8 * j)
		}
	}
	return v >> (bit & 7) & d.mask
}

func fillUint32(dst []uint32, v uint32) {
	if len(dst) == 0 {
		return
	}
	dst[0] = v
	for filled := 1; filled < len(dst); filled *= 2 {
		copy(dst[filled:], dst[:filled])
	}
}
