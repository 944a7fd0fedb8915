package objstore

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// startsFile records the ends StartWriteback is called with.
type startsFile struct {
	File
	ends []int64
}

func (f *startsFile) StartWriteback(end int64) error {
	f.ends = append(f.ends, end)
	return nil
}

// TestWritebackWriter checks that writes of any size start the writeback
// of whole pages, in order, one step behind what was written and at most
// a step apart, so that no more than about two steps are ever dirty.
func TestWritebackWriter(t *testing.T) {
	for _, chunk := range []int{1, 4095, 256 << 10, 3 << 20} {
		f := &startsFile{File: nopFile{}}
		w := newWritebackWriter(f)
		total := 0
		var written []int // total after each write
		for total < 9<<20+123 {
			n := min(chunk, 9<<20+123-total)
			if chunk == 1 {
				n = min(64<<10+1, 9<<20+123-total) // keep the test fast
			}
			if _, err := w.Write(make([]byte, n)); err != nil {
				t.Fatal(err)
			}
			total += n
			written = append(written, total)
		}
		if len(f.ends) == 0 {
			t.Fatalf("chunk %d: no writeback started over %d bytes", chunk, total)
		}
		prev := int64(0)
		for _, e := range f.ends {
			if e%4096 != 0 || e <= prev || e > int64(total)-writebackStep {
				t.Fatalf("chunk %d: ends %v: each must be page-aligned, rising, and a step behind the %d bytes written", chunk, f.ends, total)
			}
			prev = e
		}
		// What is not yet started is bounded: at the end at most three
		// steps plus one write (the writes of 3 MiB are larger than a
		// step themselves).
		if left := int64(total) - prev; left > 3*writebackStep+int64(chunk) {
			t.Errorf("chunk %d: %d bytes written after the last started writeback (at %d)", chunk, left, prev)
		}
	}
}

// TestPutStartsWriteback checks that Put on the operating system's files
// takes the writeback path and stores every byte.
func TestPutStartsWriteback(t *testing.T) {
	dir := t.TempDir()
	f, err := OSFS{}.Create(filepath.Join(dir, "probe"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.(WritebackStarter); !ok {
		t.Fatalf("OSFS files are %T, which cannot start their writeback", f)
	}
	f.Close()

	l, err := NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	data := make([]byte, 5<<20+77)
	for i := range data {
		data[i] = byte(i * 31)
	}
	if err := l.Put(context.Background(), "a/b.parquet", bytes.NewReader(data), int64(len(data)), PutOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "a/b.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("stored %d bytes that differ from the %d put", len(got), len(data))
	}
}

// nopFile is a File whose writes go nowhere.
type nopFile struct{ File }

func (nopFile) Write(p []byte) (int, error) { return len(p), nil }
