package buffer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/persist"
)

// A write that finds the buffer at MemLimit while closed segments are
// being persisted waits for their memory, up to FullWait, instead of
// being refused at once. The memory is coming back (each persisted
// segment leaves the buffer, dropSegment), and a writer faster than
// persistence (a bulk load: 7M rows/s acknowledged on 2 cores, against
// ~1-2M rows/s persisted) is slowed to the persist's pace by its
// acknowledgements, where it used to get RESOURCE_EXHAUSTED: 338 refused
// batches in 45 s of `apron bench write` at 64k-row batches, and an ADBC
// ingest or `apron write` of a file bigger than the buffer failed
// halfway. When memory is not coming back (no object store, persistence
// failing, a replace holding segments, persisted segments kept) a write
// is refused at once, as before, with the reason.
//
// A write with room takes the buffer's lock once, as before: the first
// try is a plain submit, which says as it refuses whether room is coming
// (decided under the lock it holds already; a lock-free look at the sizes
// first raced with the writes beside it and refused some). A write that
// waits holds only its batch, as received: its decoded form is let go
// with the refusal, and made again at each try.

// roomRecheck is how often a waiting write looks again without being
// woken: persistence may start failing, the buffer may close.
const roomRecheck = 100 * time.Millisecond

// roomComingLocked says whether memory will come back without anyone
// doing anything: closed segments are being persisted or leaving memory,
// and nothing else holds it. Not once a shutdown has begun
// (FinishPersist): the persister starts no other segment, and a write
// waiting would only hold the shutdown up.
func (b *WriteBuffer) roomComingLocked() bool {
	if b.persist.store == nil || !b.cfg.ReleasePersisted || b.mu.closing || b.draining() || b.replaceHoldLocked() != "" {
		return false
	}
	if err, _ := b.PersistError(); err != nil {
		return false
	}
	// Being persisted, or persisted and about to leave memory: a persisted
	// segment is dropped once its WAL file is removed, in paced steps
	// that take seconds for a large one (persistSegment).
	return len(b.mu.closed) > 0
}

// waitForRoom waits, while the buffer is full and room is coming, until
// it is not full, deadline passes, or ctx ends; the write then tries
// again. A write that waits is counted once, as it begins: counted says
// whether it was. Before waiting it calls reserve; false (too many bytes
// waiting already) returns false at once: the write is not to wait.
func (b *WriteBuffer) waitForRoom(ctx context.Context, deadline time.Time, counted *bool, reserve func() bool) bool {
	waited := false
	began := time.Now()
	defer func() {
		if waited {
			b.metrics.fullWaitSeconds.Add(time.Since(began).Seconds())
		}
	}()
	for {
		b.mu.Lock()
		if b.bufferedLocked() < b.cfg.MemLimit || !b.roomComingLocked() {
			b.mu.Unlock()
			return true
		}
		room := b.roomSignalLocked()
		b.mu.Unlock()
		wait := min(time.Until(deadline), roomRecheck)
		if wait <= 0 || ctx.Err() != nil {
			return true
		}
		if !reserve() {
			return false
		}
		waited = true
		if !*counted {
			b.metrics.fullWaits.Inc()
			*counted = true
		}
		t := time.NewTimer(wait)
		select {
		case <-room:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
}

// submitWaiting is submit, tried again after waiting for room
// (waitForRoom) while it is refused at MemLimit with room coming. Several
// writes woken by the same room may find it taken by the first ones:
// those wait again, until FullWait has passed since the write began.
func (b *WriteBuffer) submitWaiting(ctx context.Context, start time.Time, db, table string, rec arrow.RecordBatch,
	opts catalog.WriteOptions) (*PendingWrite, error) {
	p, coming, err := b.submit(db, table, rec, opts)
	if !coming || b.cfg.FullWait <= 0 || !errors.Is(err, ErrBufferFull) {
		return p, err
	}
	deadline := start.Add(b.cfg.FullWait)
	counted := false
	// The batches waiting are memory outside the buffer's accounting:
	// past waitingBytesLimit, a write is refused at once as before, so
	// that clients cannot pile up batches (up to 256 MiB each) by
	// waiting. A write reserves its batch's bytes as it begins to wait.
	var reserved int64
	defer func() { b.waitingBytes.Add(-reserved) }()
	reserve := func() bool {
		if reserved == 0 {
			size := max(persist.RecordBytes(rec), 1)
			if b.waitingBytes.Add(size) > b.waitingBytesLimit() {
				b.waitingBytes.Add(-size)
				return false
			}
			reserved = size
		}
		return true
	}
	for ctx.Err() == nil && time.Now().Before(deadline) {
		if !b.waitForRoom(ctx, deadline, &counted, reserve) {
			return nil, fmt.Errorf("%w; this batch of %d bytes could not wait for room either: the batches already waiting hold the %d bytes allowed (an eighth of --buffer-mem-limit, at least 16 MiB). Retry it, or send smaller batches",
				err, max(persist.RecordBytes(rec), 1), b.waitingBytesLimit())
		}
		p, coming, err = b.submit(db, table, rec, opts)
		if !coming || !errors.Is(err, ErrBufferFull) {
			return p, err
		}
	}
	return nil, err
}

// waitingBytesLimit bounds the batches of the writes waiting for room:
// an eighth of MemLimit (256 MiB of the default 2 GiB), at least 16 MiB.
func (b *WriteBuffer) waitingBytesLimit() int64 { return max(b.cfg.MemLimit/8, 16<<20) }

// roomSignalLocked is closed when memory next leaves the buffer
// (roomLocked): what waits for room (waitForRoom, slowDown) waits on it.
func (b *WriteBuffer) roomSignalLocked() <-chan struct{} {
	if b.mu.room == nil {
		b.mu.room = make(chan struct{})
	}
	return b.mu.room
}

// roomLocked wakes the writes waiting for room: memory left the buffer.
func (b *WriteBuffer) roomLocked() {
	if b.mu.room != nil {
		close(b.mu.room)
		b.mu.room = nil
	}
}
