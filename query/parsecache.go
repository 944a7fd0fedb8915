//go:build duckdb_arrow

package query

import (
	"container/list"
	"sync"
)

// parseCache keeps the parse trees of recent statements, so that a
// statement seen again (a dashboard's query every few seconds, and every
// query twice: once at GetFlightInfo, once at DoGet) is not parsed by
// json_serialize_sql again. A parse depends on the text alone (the parser
// resolves no name), so the text is the key; what admission then checks
// against the catalog and the caller's permissions is checked again on
// every use.
//
// Trees handed out are shared between goroutines and must never be
// modified: every reader of a tree (admission, pruning, column metadata,
// direct scans, DELETE) only reads it.
//
// The cache is bounded by the size of the serialized trees it holds (a
// fair measure of their memory), least recently used out first; a
// statement whose tree alone is over an eighth of the bound is not kept.
// Errors of the parse (not a SELECT; a syntax error) are kept as well:
// they are as deterministic as trees.
type parseCache struct {
	mu      sync.Mutex
	max     int64
	size    int64
	entries map[string]*list.Element
	lru     list.List // of *parsed, most recent first
	hits    uint64
	misses  uint64
}

type parsed struct {
	sql  string
	tree map[string]any
	err  error
	cost int64
}

// defaultParseCacheBytes bounds the cache: 16 MiB of serialized trees,
// a few hundred dashboard queries, ~50-80 MiB of heap at most.
const defaultParseCacheBytes = 16 << 20

func newParseCache(max int64) *parseCache {
	return &parseCache{max: max, entries: make(map[string]*list.Element)}
}

func (c *parseCache) get(sql string) (*parsed, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[sql]
	if !ok {
		c.misses++
		return nil, false
	}
	c.hits++
	c.lru.MoveToFront(el)
	return el.Value.(*parsed), true
}

func (c *parseCache) put(p *parsed) {
	p.cost += int64(len(p.sql))
	if c.max <= 0 || p.cost > c.max/8 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[p.sql]; ok {
		return
	}
	c.entries[p.sql] = c.lru.PushFront(p)
	c.size += p.cost
	for c.size > c.max {
		el := c.lru.Back()
		old := el.Value.(*parsed)
		c.lru.Remove(el)
		delete(c.entries, old.sql)
		c.size -= old.cost
	}
}

func (c *parseCache) stats() (hits, misses uint64, entries int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits, c.misses, len(c.entries), c.size
}
