package objstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// Memory is a Store that keeps objects in memory, for `--object-store
// memory` and tests. It is safe for concurrent use. Stored byte slices are
// never modified after a Put, so readers need no lock while reading.
type Memory struct {
	now func() time.Time
	mu  struct {
		sync.RWMutex
		objects map[string]memObject
		closed  bool
	}
}

type memObject struct {
	data  []byte
	attrs Attrs
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	m := &Memory{now: time.Now}
	m.mu.objects = make(map[string]memObject)
	return m
}

// Put reads all of data first (outside the lock), then stores it atomically.
func (m *Memory) Put(ctx context.Context, name string, data io.Reader, size int64, opts PutOptions) error {
	if err := checkPut(name, data); err != nil {
		return err
	}
	b, err := readAllLimited(ctxReader{ctx, data}, size)
	if err != nil {
		return fmt.Errorf("objstore: put %q: %w", name, err)
	}
	crc := CRC32C(b)
	if err := checkSizeCRC(name, size, int64(len(b)), opts.CRC32C, crc); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("objstore: put %q: %w", name, err)
	}
	obj := memObject{data: b, attrs: Attrs{Size: int64(len(b)), CRC32C: crc, Created: m.now()}}

	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return ErrClosed
	}
	if _, ok := m.mu.objects[name]; ok && opts.MustNotExist {
		return fmt.Errorf("objstore: put %q: %w", name, ErrExists)
	}
	m.mu.objects[name] = obj
	return nil
}

func (m *Memory) lookup(ctx context.Context, op, name string) (memObject, error) {
	if err := ctx.Err(); err != nil {
		return memObject{}, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.mu.closed {
		return memObject{}, ErrClosed
	}
	obj, ok := m.mu.objects[name]
	if !ok {
		return memObject{}, fmt.Errorf("objstore: %s %q: %w", op, name, ErrNotFound)
	}
	return obj, nil
}

// Get returns a reader over the object.
func (m *Memory) Get(ctx context.Context, name string) (io.ReadCloser, error) {
	return m.GetRange(ctx, name, 0, -1)
}

// GetRange returns a reader over part of the object (see Store).
func (m *Memory) GetRange(ctx context.Context, name string, off, n int64) (io.ReadCloser, error) {
	if err := checkRange(name, off); err != nil {
		return nil, err
	}
	obj, err := m.lookup(ctx, "get", name)
	if err != nil {
		return nil, err
	}
	start, end := clip(obj.attrs.Size, off, n)
	return io.NopCloser(bytes.NewReader(obj.data[start:end])), nil
}

// List returns the objects whose names start with prefix, sorted.
func (m *Memory) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if err := validatePrefix(prefix); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	if m.mu.closed {
		m.mu.RUnlock()
		return nil, ErrClosed
	}
	var out []ObjectInfo
	for name, obj := range m.mu.objects {
		if strings.HasPrefix(name, prefix) {
			out = append(out, ObjectInfo{Name: name, Attrs: obj.attrs})
		}
	}
	m.mu.RUnlock()
	slices.SortFunc(out, func(a, b ObjectInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Delete removes the object; a missing name is not an error.
func (m *Memory) Delete(ctx context.Context, name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return ErrClosed
	}
	delete(m.mu.objects, name)
	return nil
}

// Attributes returns the object's size, CRC32C and creation time.
func (m *Memory) Attributes(ctx context.Context, name string) (Attrs, error) {
	if err := ValidateName(name); err != nil {
		return Attrs{}, err
	}
	obj, err := m.lookup(ctx, "attributes", name)
	return obj.attrs, err
}

// URI returns "memory:///name"; nothing outside this process can read it.
func (m *Memory) URI(name string) string { return "memory:///" + name }

// Close drops every object; later calls fail with ErrClosed. Idempotent.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.closed = true
	m.mu.objects = nil
	return nil
}
