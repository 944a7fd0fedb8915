package persist

import (
	"cmp"
	"math/bits"
	"slices"
)

// A bucket of the permutation (the rows of one value of the first key) is
// sorted by the other keys, then time, then buffer order. Compared
// through the chunks (partSource.rank and time: the chunk's dictionary
// indices, its validity, its ranks, its times), each comparison reads two
// rows scattered over the whole segment: a bucket's rows are every
// 200th row of the chunks when 200 series write together, and a segment
// is a GiB. A profile of a 16.7M-row persist had 40% of its CPU in those
// reads. So a bucket is sorted as keys made once a row (bucketKey: the
// other keys' ranks packed in one word, the time, the row), 24 bytes a
// row in a scratch slice of its worker, and written back; pdqsort on them
// finds runs already in order as cheaply as before.
//
// A bucket of more than maxKeyedRows rows (a table of few series), or
// ranks that do not fit one word, are sorted through the chunks as
// before, after a look at whether they are in order already: the scratch
// stays bounded beside the permutation, the persist's largest allocation.

// maxKeyedRows bounds a worker's scratch: 24 MiB of keys. A variable for
// tests.
var maxKeyedRows = 1 << 20

// bucketKey is a row's sort key: the ranks of keys 1.. packed, most
// significant first, nulls as the largest (bucketSorter.pack); its time;
// the row itself, last, for buffer order.
type bucketKey[P uint32 | uint64] struct {
	tags uint64
	time int64
	row  P
}

func compareKeys[P uint32 | uint64](a, b bucketKey[P]) int {
	if c := cmp.Compare(a.tags, b.tags); c != 0 {
		return c
	}
	if c := cmp.Compare(a.time, b.time); c != 0 {
		return c
	}
	return cmp.Compare(a.row, b.row)
}

// bucketSorter sorts the buckets of one partition; newBucketSorter once,
// sort from any worker, each with its scratch.
type bucketSorter[P uint32 | uint64] struct {
	s *partSource
	// wide turns a row into the chunk<<32 | row that rank and time take.
	wide func(P) uint64
	// rest compares two rows through the chunks: the other keys, time,
	// buffer order.
	rest func(a, b P) int
	// nulls[k] is the value a null of key k packs as (its distinct
	// values: above every rank), width[k] its bits; packs says they fit
	// in 64 bits.
	nulls []uint64
	width []uint
	packs bool
}

func newBucketSorter[P uint32 | uint64](s *partSource, wide func(P) uint64, rest func(a, b P) int) *bucketSorter[P] {
	b := &bucketSorter[P]{s: s, wide: wide, rest: rest,
		nulls: make([]uint64, len(s.keys)), width: make([]uint, len(s.keys))}
	total := uint(0)
	for k := 1; k < len(s.keys); k++ {
		b.nulls[k] = uint64(s.distinct[k])
		b.width[k] = uint(bits.Len(uint(s.distinct[k])))
		total += b.width[k]
	}
	b.packs = total <= 64
	return b
}

// pack is row w's other keys' ranks in one word, ordered as rest orders
// them.
func (b *bucketSorter[P]) pack(w uint64) uint64 {
	var t uint64
	for k := 1; k < len(b.s.keys); k++ {
		r := b.s.rank(k, w)
		v := b.nulls[k]
		if r != nullRank {
			v = uint64(r)
		}
		t = t<<b.width[k] | v
	}
	return t
}

// sort sorts rows; scratch is the worker's, grown as needed up to
// maxKeyedRows and returned for its next bucket.
func (b *bucketSorter[P]) sort(rows []P, scratch []bucketKey[P]) []bucketKey[P] {
	if len(rows) < 2 {
		return scratch
	}
	if !b.packs || len(rows) > maxKeyedRows {
		if !slices.IsSortedFunc(rows, b.rest) {
			slices.SortFunc(rows, b.rest)
		}
		return scratch
	}
	if cap(scratch) < len(rows) {
		scratch = make([]bucketKey[P], len(rows))
	}
	keys := scratch[:len(rows)]
	for i, v := range rows {
		w := b.wide(v)
		keys[i] = bucketKey[P]{tags: b.pack(w), time: b.s.time(w), row: v}
	}
	slices.SortFunc(keys, compareKeys[P])
	for i := range keys {
		rows[i] = keys[i].row
	}
	return scratch
}
