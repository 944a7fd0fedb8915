package output

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"strings"
)

// valueIndex maps a column's distinct values to their dictionary indices:
// an open-addressing hash table (linear probing, at most half full). In
// BenchmarkParquet/cli's profile a Go map took 1.3 times as long on its
// strings and 2 to 4 times on its floats (longer than pqarrow's own hash
// table, which this one replaces for dictColumn's columns).
type valueIndex[K comparable] struct {
	keys []K
	ids  []int32 // the key's index + 1; 0 marks an empty slot
	n    int
	hash func(K) uint64
	own  func(K) K // the key to keep of one added (a copy of a string)
}

func newValueIndex[K comparable](hash func(K) uint64, own func(K) K) *valueIndex[K] {
	return &valueIndex[K]{keys: make([]K, 256), ids: make([]int32, 256), hash: hash, own: own}
}

// get returns k's index, adding own(k) as index next when it is new
// (added reports that).
func (t *valueIndex[K]) get(k K, next int32) (id int32, added bool) {
	mask := uint64(len(t.ids) - 1)
	for i := t.hash(k) & mask; ; i = (i + 1) & mask {
		switch {
		case t.ids[i] == 0:
			t.keys[i], t.ids[i] = t.own(k), next+1
			if t.n++; t.n*2 > len(t.ids) {
				t.grow()
			}
			return next, true
		case t.keys[i] == k:
			return t.ids[i] - 1, false
		}
	}
}

func (t *valueIndex[K]) grow() {
	keys, ids := t.keys, t.ids
	t.keys, t.ids = make([]K, 2*len(keys)), make([]int32, 2*len(ids))
	mask := uint64(len(t.ids) - 1)
	for j, id := range ids {
		if id == 0 {
			continue
		}
		i := t.hash(keys[j]) & mask
		for t.ids[i] != 0 {
			i = (i + 1) & mask
		}
		t.keys[i], t.ids[i] = keys[j], id
	}
}

// hashBits mixes a fixed-width value's bits (Fibonacci hashing, the high
// half folded in so that linear probing sees them).
func hashBits[K uint64 | uint32](k K) uint64 {
	hi, lo := bits.Mul64(uint64(k), 0x9E3779B97F4A7C15)
	return hi ^ lo
}

var stringSeed = maphash.MakeSeed()

func hashString(s string) uint64 { return maphash.String(stringSeed, s) }

// shortKey is a string of at most 16 bytes (most tags) as two words and a
// length: hashed and compared without a call, as the server's buffer does
// (buffer/string_encode.go).
type shortKey struct {
	lo, hi uint64
	n      int
}

func toShortKey(s string) shortKey {
	var b [16]byte
	copy(b[:], s)
	return shortKey{lo: binary.LittleEndian.Uint64(b[:8]), hi: binary.LittleEndian.Uint64(b[8:]), n: len(s)}
}

func hashShortKey(k shortKey) uint64 {
	hi, lo := bits.Mul64(k.lo^uint64(k.n)<<59, 0x9E3779B97F4A7C15)
	return hi ^ lo ^ k.hi*0xC2B2AE3D27D4EB4F
}

// stringIndex is a valueIndex of strings: short ones as shortKeys, the
// others hashed with maphash and kept as copies.
type stringIndex struct {
	short *valueIndex[shortKey]
	long  *valueIndex[string]
}

func newStringIndex() stringIndex {
	return stringIndex{
		short: newValueIndex(hashShortKey, func(k shortKey) shortKey { return k }),
		long:  newValueIndex(hashString, strings.Clone),
	}
}

func (t stringIndex) get(s string, next int32) (int32, bool) {
	if len(s) <= 16 {
		return t.short.get(toShortKey(s), next)
	}
	return t.long.get(s, next)
}
