//go:build duckdb_arrow

package query

import (
	"sync"
	"weak"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Combinations kept per chunk.
//
// Checking a chunk for the latest row per combination of tag columns
// (latest_multi.go) reads each of its rows: ~10 ms for the peer table's
// 5M, every query, for the ~200 combinations each chunk holds. A sealed
// chunk never changes, so the combinations it holds are kept
// (comboCache) once a pass over all its rows has found them, and the
// next query checks their numbers alone.
//
// An entry is named by a weak pointer to the buffer of the chunk's first
// key column's indices: the same sealed chunk, read by another query,
// has the same buffer; a chunk freed and another made in its memory has
// another buffer object, and a weak pointer does not keep a chunk's
// memory, nor its name, alive. The entry also holds the numbering it was
// made with (the key columns, the dictionaries' lengths), and is used
// only for the same. The open chunk's snapshots are new buffers each
// time and are kept in vain, until their weak pointers die.

// maxComboCodes bounds the numbers kept over all entries (4 bytes each):
// past it, dead entries go, then all.
const maxComboCodes = 4 << 20

// comboKey names a chunk's combinations of some key columns.
type comboKey struct {
	indices weak.Pointer[memory.Buffer]
	cols    string
}

// comboEntry are the combination numbers a chunk's rows hold, ascending,
// under the numbering of dictionaries of lengths lens.
type comboEntry struct {
	lens  []int
	codes []int32
}

// comboCache keeps chunks' combinations, shared by queries.
type comboCache struct {
	mu    sync.Mutex
	m     map[comboKey]*comboEntry
	codes int
}

func newComboCache() *comboCache { return &comboCache{m: map[comboKey]*comboEntry{}} }

// keyOf names m's chunk and columns; ok false when it has nothing to
// name it by (a key column without a dictionary, nil c).
func (c *comboCache) keyOf(m *multiCols, cols string) (comboKey, bool) {
	if c == nil || m.keys[0].arr == nil {
		return comboKey{}, false
	}
	bufs := m.keys[0].arr.Data().Buffers()
	if len(bufs) < 2 || bufs[1] == nil {
		return comboKey{}, false
	}
	return comboKey{indices: weak.Make(bufs[1]), cols: cols}, true
}

// lens are the lengths of m's dictionaries (-1: none).
func (m *multiCols) lens() []int {
	out := make([]int, len(m.keys))
	for i, k := range m.keys {
		out[i] = k.dictLen()
	}
	return out
}

// dictLen is the length of k's dictionary, -1 for none (every key NULL).
func (k latestKey) dictLen() int {
	if k.dict == nil {
		return -1
	}
	return k.dict.Len()
}

// get returns the combinations kept for k under m's numbering, nil when
// none are.
// lensAre says whether lens are m's lens().
func (m *multiCols) lensAre(lens []int) bool {
	if len(lens) != len(m.keys) {
		return false
	}
	for i, k := range m.keys {
		if lens[i] != k.dictLen() {
			return false
		}
	}
	return true
}

func (c *comboCache) get(k comboKey, m *multiCols) []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[k]
	if e == nil || !m.lensAre(e.lens) {
		return nil
	}
	return e.codes
}

// put keeps codes (ascending, not changed after) as k's under m's
// numbering.
func (c *comboCache) put(k comboKey, m *multiCols, codes []int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.m[k]; old != nil {
		c.codes -= len(old.codes)
	}
	if c.codes+len(codes) > maxComboCodes {
		for key, e := range c.m {
			if key.indices.Value() == nil {
				c.codes -= len(e.codes)
				delete(c.m, key)
			}
		}
		if c.codes+len(codes) > maxComboCodes {
			clear(c.m)
			c.codes = 0
		}
	}
	c.m[k] = &comboEntry{lens: m.lens(), codes: codes}
	c.codes += len(codes)
}
