package objstoretest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/apron-db/apron/objstore"
)

// Errors of a Faulty store.
var (
	// ErrInjected is a transient failure: the operation did not happen
	// (or, for a lost acknowledgement, did).
	ErrInjected = errors.New("objstoretest: injected failure")
	// ErrCrashed is returned by every operation once the store "crashed".
	ErrCrashed = errors.New("objstoretest: crashed")
)

// Faulty wraps a Store and fails operations on cue, after pebble's errorfs:
// the next n operations, all of them while down, every one after the k-th
// (a crash: the operation and all later ones fail, and nothing more reaches
// the inner store), or a Put that lands but reports failure (a lost
// acknowledgement). Gate lets a test count its own steps (a WAL file
// deletion) among the store's operations. It is safe for concurrent use.
type Faulty struct {
	inner objstore.Store
	mu    struct {
		sync.Mutex
		ops        int
		crashAfter int // -1: never
		crashed    bool
		failNext   int
		down       bool
		loseAcks   int
		failures   int
		log        []string
		hang       bool
	}
}

// Hang makes every operation started while hanging wait until its
// context ends, as a request to a store that stopped answering does.
func (f *Faulty) Hang(hang bool) {
	f.mu.Lock()
	f.mu.hang = hang
	f.mu.Unlock()
}

// stall waits for ctx while the store hangs.
func (f *Faulty) stall(ctx context.Context) error {
	f.mu.Lock()
	hang := f.mu.hang
	f.mu.Unlock()
	if !hang {
		return nil
	}
	<-ctx.Done()
	f.mu.Lock()
	f.mu.failures++
	f.mu.Unlock()
	return ctx.Err()
}

var _ objstore.Store = (*Faulty)(nil)

// NewFaulty wraps s; it fails nothing until told to.
func NewFaulty(s objstore.Store) *Faulty {
	f := &Faulty{inner: s}
	f.mu.crashAfter = -1
	return f
}

// CrashAfter makes the store crash once n more operations have been let
// through: operation n+1 and every later one fail with ErrCrashed. n < 0
// cancels a crash that has not happened.
func (f *Faulty) CrashAfter(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n < 0 {
		f.mu.crashAfter = -1
		return
	}
	f.mu.crashAfter = f.mu.ops + n
}

// FailNext makes the next n operations fail with ErrInjected.
func (f *Faulty) FailNext(n int) {
	f.mu.Lock()
	f.mu.failNext = n
	f.mu.Unlock()
}

// SetDown fails every operation with ErrInjected while down.
func (f *Faulty) SetDown(down bool) {
	f.mu.Lock()
	f.mu.down = down
	f.mu.Unlock()
}

// LoseAcks makes the next n successful Puts report ErrInjected.
func (f *Faulty) LoseAcks(n int) {
	f.mu.Lock()
	f.mu.loseAcks = n
	f.mu.Unlock()
}

// Crashed says whether the crash happened.
func (f *Faulty) Crashed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.crashed
}

// Ops is the number of operations let through so far.
func (f *Faulty) Ops() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.ops
}

// Failures is the number of operations failed so far.
func (f *Faulty) Failures() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.failures
}

// Log lists the operations let through, "op name", in order.
func (f *Faulty) Log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.mu.log...)
}

// Gate counts one operation named op on name, failing it as the store's
// own would be; a test calls it for steps outside the store that belong to
// the same sequence.
func (f *Faulty) Gate(op, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.mu.crashed:
		f.mu.failures++
		return fmt.Errorf("%s %q: %w", op, name, ErrCrashed)
	case f.mu.crashAfter >= 0 && f.mu.ops >= f.mu.crashAfter:
		f.mu.crashed = true
		f.mu.failures++
		return fmt.Errorf("%s %q: %w", op, name, ErrCrashed)
	case f.mu.down:
		f.mu.failures++
		return fmt.Errorf("%s %q: %w (store down)", op, name, ErrInjected)
	case f.mu.failNext > 0:
		f.mu.failNext--
		f.mu.failures++
		return fmt.Errorf("%s %q: %w", op, name, ErrInjected)
	}
	f.mu.ops++
	f.mu.log = append(f.mu.log, op+" "+name)
	return nil
}

func (f *Faulty) loseAck() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.loseAcks > 0 {
		f.mu.loseAcks--
		f.mu.failures++
		return true
	}
	return false
}

// Put implements objstore.Store.
func (f *Faulty) Put(ctx context.Context, name string, data io.Reader, size int64, opts objstore.PutOptions) error {
	if err := f.stall(ctx); err != nil {
		return fmt.Errorf("put %q: %w", name, err)
	}
	if err := f.Gate("put", name); err != nil {
		return err
	}
	if err := f.inner.Put(ctx, name, data, size, opts); err != nil {
		return err
	}
	if f.loseAck() {
		return fmt.Errorf("put %q: %w (acknowledgement lost; the object was stored)", name, ErrInjected)
	}
	return nil
}

// Get implements objstore.Store.
func (f *Faulty) Get(ctx context.Context, name string) (io.ReadCloser, error) {
	if err := f.Gate("get", name); err != nil {
		return nil, err
	}
	return f.inner.Get(ctx, name)
}

// GetRange implements objstore.Store.
func (f *Faulty) GetRange(ctx context.Context, name string, off, n int64) (io.ReadCloser, error) {
	if err := f.Gate("getrange", name); err != nil {
		return nil, err
	}
	return f.inner.GetRange(ctx, name, off, n)
}

// List implements objstore.Store.
func (f *Faulty) List(ctx context.Context, prefix string) ([]objstore.ObjectInfo, error) {
	if err := f.Gate("list", prefix); err != nil {
		return nil, err
	}
	return f.inner.List(ctx, prefix)
}

// Delete implements objstore.Store.
func (f *Faulty) Delete(ctx context.Context, name string) error {
	if err := f.Gate("delete", name); err != nil {
		return err
	}
	return f.inner.Delete(ctx, name)
}

// Attributes implements objstore.Store.
func (f *Faulty) Attributes(ctx context.Context, name string) (objstore.Attrs, error) {
	if err := f.Gate("attributes", name); err != nil {
		return objstore.Attrs{}, err
	}
	return f.inner.Attributes(ctx, name)
}

// URI implements objstore.Store.
func (f *Faulty) URI(name string) string { return f.inner.URI(name) }

// Close closes the inner store.
func (f *Faulty) Close() error { return f.inner.Close() }
