// Package lograte limits log lines of one kind to one per interval, counting
// the ones held back, so that a flood of failures (a client retrying a bad
// token, an object store down) cannot fill the log.
package lograte

import (
	"sync"
	"time"
)

// Limiter lets one event through per interval. The zero value with Every
// set is ready; it is safe for concurrent use.
type Limiter struct {
	Every time.Duration
	mu    sync.Mutex
	last  time.Time
	held  int
}

// Allow says whether to log now, with the events held back since the last
// one let through.
func (l *Limiter) Allow() (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now := time.Now(); now.Sub(l.last) >= l.Every {
		n := l.held
		l.last, l.held = now, 0
		return n, true
	}
	l.held++
	return 0, false
}

// ByKey is a Limiter per key: a flood of one kind of event is held back
// while the first of another kind still gets through, since a new kind
// (a store that was slow now refusing) is news the log must carry. Keys
// must come from a small fixed set (error classes): each one keeps its
// Limiter for good. The zero value with Every set is ready; it is safe
// for concurrent use.
type ByKey struct {
	Every time.Duration
	mu    sync.Mutex
	m     map[string]*Limiter
}

// Allow says whether to log an event of key now, with the events of that
// key held back since the last one let through.
func (k *ByKey) Allow(key string) (int, bool) {
	k.mu.Lock()
	l := k.m[key]
	if l == nil {
		if k.m == nil {
			k.m = make(map[string]*Limiter)
		}
		l = &Limiter{Every: k.Every}
		k.m[key] = l
	}
	k.mu.Unlock()
	return l.Allow()
}
