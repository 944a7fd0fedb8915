//go:build duckdb_arrow

package query

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"unicode/utf8"
	"unsafe"

	duck "github.com/duckdb/duckdb-go-bindings"
)

// pqStrings is a column chunk's dictionary of strings (or blobs): the
// values, and one DuckDB vector of them, made once for the chunk, with a
// NULL after the last (at index n) for the NULL rows to select. Rows read
// through the dictionary go out as a dictionary vector over it: a
// selection of the rows' indices, no string copied (as emitDict does for
// buffered chunks). A vector may be larger than DuckDB's vector size.
type pqStrings struct {
	data       []byte   // a copy of the dictionary page
	start, end []uint32 // value i is data[start[i]:end[i]]
	blob       bool
	vec        duck.Vector
	// consts are values made of entries, for constant vectors.
	consts map[uint32]duck.Value
	// In a pqDictCache: the hash of data, and how many columns use it.
	hash  uint64
	users int
}

// plainByteArrays calls each with the bounds [start, end) in page of
// each of its n PLAIN-encoded byte arrays (a 4-byte little-endian length,
// then the bytes); an error if page is shorter than they say.
func plainByteArrays(page []byte, n int, each func(i, start, end int)) error {
	pos := 0
	for i := range n {
		if len(page)-pos < 4 {
			return fmt.Errorf("%w: dictionary short", errCorrupt)
		}
		l := int(binary.LittleEndian.Uint32(page[pos:]))
		pos += 4
		if l > len(page)-pos {
			return fmt.Errorf("%w: dictionary short", errCorrupt)
		}
		each(i, pos, pos+l)
		pos += l
	}
	return nil
}

// newPQStrings reads a PLAIN-encoded dictionary page of n values.
func newPQStrings(page []byte, n int, blob bool) (*pqStrings, error) {
	s := &pqStrings{data: append([]byte(nil), page...), start: make([]uint32, n), end: make([]uint32, n), blob: blob}
	if err := plainByteArrays(s.data, n, func(i, start, end int) { s.start[i], s.end[i] = uint32(start), uint32(end) }); err != nil {
		return nil, err
	}
	typ := duck.CreateLogicalType(duck.TypeVarchar)
	if blob {
		duck.DestroyLogicalType(&typ)
		typ = duck.CreateLogicalType(duck.TypeBlob)
	}
	s.vec = duck.CreateVector(typ, duck.IdxT(n+1))
	duck.DestroyLogicalType(&typ)
	for i := range n {
		assignBytes(s.vec, i, s.value(uint32(i)))
	}
	duck.VectorEnsureValidityWritable(s.vec)
	duck.ValiditySetRowInvalid(duck.VectorGetValidity(s.vec), duck.IdxT(n))
	return s, nil
}

func (s *pqStrings) n() int { return len(s.start) }

// size is about the memory s holds: the values twice (DuckDB keeps those
// longer than 12 bytes apart), 16 bytes a string in the vector.
func (s *pqStrings) size() int { return 2*len(s.data) + 24*s.n() }

func (s *pqStrings) value(i uint32) []byte { return s.data[s.start[i]:s.end[i]] }

// assignBytes writes b as row i of vec, a VARCHAR or BLOB vector. Strings
// are not checked to be UTF-8 (DuckDB's check would make them NULL), as
// DuckDB's Arrow import does not check those of buffered chunks: a string
// reads the same from memory and from a file.
func assignBytes(vec duck.Vector, i int, b []byte) {
	duck.UnsafeVectorAssignStringElementLen(vec, duck.IdxT(i), b)
}

// constant returns entry i as a DuckDB value, or false for a VARCHAR that
// is not UTF-8 (which a value cannot hold).
func (s *pqStrings) constant(i uint32) (duck.Value, bool) {
	if v, ok := s.consts[i]; ok {
		return v, true
	}
	b := s.value(i)
	if !s.blob && !utf8.Valid(b) {
		return duck.Value{}, false
	}
	var v duck.Value
	if s.blob {
		v = duck.CreateBlob(b)
	} else {
		v = duck.CreateVarcharLength(unsafe.String(unsafe.SliceData(b), len(b)), duck.IdxT(len(b)))
	}
	if s.consts == nil {
		s.consts = map[uint32]duck.Value{}
	}
	s.consts[i] = v
	return v, true
}

// destroy lets go of the vector and values; vectors DuckDB was handed
// share their memory and keep it.
func (s *pqStrings) destroy() {
	duck.DestroyVector(&s.vec)
	for _, v := range s.consts {
		duck.DestroyValue(&v)
	}
	s.consts = nil
}

// pqDictCache keeps the string dictionaries a scan thread made into DuckDB
// vectors, for the next row groups and files: the writer puts a file's
// dictionary (its partition's distinct values) into each of its row
// groups, and the partitions of a table often hold the same series. Making
// one costs a call into DuckDB per value.
type pqDictCache struct {
	seed    maphash.Seed
	seeded  bool
	entries []*pqStrings // least recently used first
	bytes   int
}

// Bounds of a pqDictCache; dictionaries in use stay over them.
const (
	maxCachedDicts     = 16
	maxCachedDictBytes = 32 << 20
)

// get returns the dictionary of a PLAIN dictionary page of n values, in
// use until release.
func (c *pqDictCache) get(page []byte, n int, blob bool) (*pqStrings, error) {
	if !c.seeded {
		c.seed, c.seeded = maphash.MakeSeed(), true
	}
	h := maphash.Bytes(c.seed, page)
	for i, s := range c.entries {
		if s.hash == h && s.blob == blob && s.n() == n && bytes.Equal(s.data, page) {
			copy(c.entries[i:], c.entries[i+1:])
			c.entries[len(c.entries)-1] = s
			s.users++
			return s, nil
		}
	}
	s, err := newPQStrings(page, n, blob)
	if err != nil {
		return nil, err
	}
	s.hash, s.users = h, 1
	c.entries = append(c.entries, s)
	c.bytes += s.size()
	c.evict()
	return s, nil
}

func (c *pqDictCache) release(s *pqStrings) {
	s.users--
	c.evict()
}

// evict destroys the least recently used dictionaries not in use while
// the cache is over its bounds.
func (c *pqDictCache) evict() {
	for i := 0; i < len(c.entries) && (len(c.entries) > maxCachedDicts || c.bytes > maxCachedDictBytes); {
		s := c.entries[i]
		if s.users > 0 {
			i++
			continue
		}
		c.bytes -= s.size()
		s.destroy()
		c.entries = append(c.entries[:i], c.entries[i+1:]...)
	}
}

// destroy destroys every dictionary; none may be in use.
func (c *pqDictCache) destroy() {
	for _, s := range c.entries {
		s.destroy()
	}
	c.entries, c.bytes = nil, 0
}

// pqMinConstRun is the shortest run of one string a scan cuts its output
// at, to hand DuckDB a constant vector: files are sorted by their string
// columns, and a constant group key is one hash table lookup for all the
// rows (a dictionary vector made through the C API is hashed row by row:
// DuckDB caches the lookups only for dictionaries of its own storage).
const pqMinConstRun = 256

// constRun returns the dictionary index of the next rows when they are
// one run of one valid value, and how many rows the run has left (0 when
// they are not).
func (c *pqColumn) constRun() (uint32, int, error) {
	if c.left == 0 {
		if err := c.nextPage(); err != nil {
			return 0, 0, err
		}
	}
	if !c.indexed || c.strs == nil {
		return 0, 0, nil
	}
	v, n, err := c.idx.current()
	if err != nil || n == 0 || int(v) >= c.strs.n() {
		return 0, 0, err
	}
	n = min(n, c.left)
	if c.p.nullable {
		dv, dn, err := c.defs.current()
		if err != nil || dn == 0 || dv != 1 {
			return 0, 0, err
		}
		n = min(n, dn)
	}
	return v, n, nil
}

// emitBytes writes the next k rows of a string or blob column into vec:
// as a dictionary vector when all k are dictionary indices, else (a chunk
// whose dictionary grew too large for the writer goes on in PLAIN pages)
// as a flat vector of copies.
func (c *pqColumn) emitBytes(vec duck.Vector, k int) error {
	if v, n, err := c.constRun(); err != nil {
		return err
	} else if n >= k {
		if val, ok := c.strs.constant(v); ok {
			c.idx.skip(k)
			if c.p.nullable {
				c.defs.skip(k)
			}
			c.left -= k
			duck.VectorReferenceValue(vec, val)
			return nil
		}
	}
	flat := c.strs == nil
	var sel duck.SelectionVector
	var selected []uint32
	if !flat {
		// A selection of its own per call: the sliced vector shares it,
		// and DuckDB may hold the output after this call.
		sel = duck.CreateSelectionVector(duck.IdxT(k))
		defer duck.DestroySelectionVector(&sel)
		selected = unsafe.Slice((*uint32)(unsafe.Pointer(duck.SelectionVectorGetDataPtr(sel))), k)
	}
	var mask []uint64
	invalid := func(r int) {
		if mask == nil {
			mask = validityOf(vec, k)
		}
		mask[r>>6] &^= 1 << (r & 63)
	}
	for done := 0; done < k; {
		n, lv, nv, err := c.nextRun(k - done)
		if err != nil {
			return err
		}
		switch {
		case c.indexed && !flat:
			// Indices straight into the selection, then spread from the
			// back around the NULLs, which select the NULL after the
			// dictionary.
			ind := selected[done : done+n]
			if got, err := c.idx.decode(ind[:nv]); err != nil || got < nv {
				return fmt.Errorf("%w: dictionary indices short", errCorrupt)
			}
			dn := uint32(c.strs.n())
			for _, x := range ind[:nv] {
				if x >= dn {
					return fmt.Errorf("%w: a dictionary index out of range", errCorrupt)
				}
			}
			if lv != nil {
				j := nv - 1
				for r := n - 1; r >= 0; r-- {
					if lv[r] != 0 {
						ind[r] = ind[j]
						j--
					} else {
						ind[r] = dn
					}
				}
			}
		case c.indexed:
			ind, err := c.indices(nv)
			if err != nil {
				return err
			}
			j := 0
			for r := range n {
				if lv != nil && lv[r] == 0 {
					invalid(done + r)
					continue
				}
				x := ind[j]
				j++
				if int(x) >= c.strs.n() {
					return fmt.Errorf("%w: a dictionary index out of range", errCorrupt)
				}
				assignBytes(vec, done+r, c.strs.value(x))
			}
		default:
			if !flat {
				// The rows so far were selected: copy them instead.
				for r, x := range selected[:done] {
					if int(x) == c.strs.n() {
						invalid(r)
					} else {
						assignBytes(vec, r, c.strs.value(x))
					}
				}
				flat = true
			}
			for r := range n {
				if lv != nil && lv[r] == 0 {
					invalid(done + r)
					continue
				}
				if len(c.plain) < 4 {
					return fmt.Errorf("%w: page values short", errCorrupt)
				}
				l := int(binary.LittleEndian.Uint32(c.plain))
				if l > len(c.plain)-4 {
					return fmt.Errorf("%w: page values short", errCorrupt)
				}
				assignBytes(vec, done+r, c.plain[4:4+l])
				c.plain = c.plain[4+l:]
			}
		}
		c.left -= n
		done += n
	}
	if !flat {
		duck.VectorReferenceVector(vec, c.strs.vec)
		duck.SliceVector(vec, sel, duck.IdxT(k))
	}
	return nil
}
