//go:build duckdb_arrow

package query

import (
	"container/list"
	"sync"
)

// lru is a map bounded by the total cost of its values, the least
// recently used out first; safe for concurrent use. Values are shared
// between goroutines once put: they must not be modified.
type lru[K comparable, V any] struct {
	mu           sync.Mutex
	max, size    int64
	entries      map[K]*list.Element
	order        list.List // of *lruEntry, most recent first
	hits, misses uint64
}

type lruEntry[K comparable, V any] struct {
	key  K
	val  V
	cost int64
}

func newLRU[K comparable, V any](max int64) *lru[K, V] {
	return &lru[K, V]{max: max, entries: make(map[K]*list.Element)}
}

func (c *lru[K, V]) get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[k]
	if !ok {
		c.misses++
		var zero V
		return zero, false
	}
	c.hits++
	c.order.MoveToFront(el)
	return el.Value.(*lruEntry[K, V]).val, true
}

// peek is get without counting a hit or a miss and without moving k
// forward: a second look at what a query has just used.
func (c *lru[K, V]) peek(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[k]; ok {
		return el.Value.(*lruEntry[K, V]).val, true
	}
	var zero V
	return zero, false
}

// put keeps v under k, unless its cost alone is over an eighth of the
// bound (one huge value would push out everything else).
func (c *lru[K, V]) put(k K, v V, cost int64) {
	if c.max <= 0 || cost > c.max/8 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[k]; ok {
		return
	}
	c.entries[k] = c.order.PushFront(&lruEntry[K, V]{key: k, val: v, cost: cost})
	c.size += cost
	for c.size > c.max {
		el := c.order.Back()
		old := el.Value.(*lruEntry[K, V])
		c.order.Remove(el)
		delete(c.entries, old.key)
		c.size -= old.cost
	}
}

// keys returns the keys kept, the most recently used first.
func (c *lru[K, V]) keys() []K {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]K, 0, len(c.entries))
	for el := c.order.Front(); el != nil; el = el.Next() {
		out = append(out, el.Value.(*lruEntry[K, V]).key)
	}
	return out
}

func (c *lru[K, V]) stats() (hits, misses uint64, entries int, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits, c.misses, len(c.entries), c.size
}
