package wal_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/apron-db/apron/wal"
)

// Benchmarks run only with -bench. They write to the directory of
// b.TempDir, so the numbers depend on what file system backs it (set TMPDIR
// to a real disk to measure fsync).

var benchCases = []struct {
	name    string
	size    int
	writers int
}{
	{"4MiB/1writer", 4 << 20, 1},
	{"50KiB/32writers", 50 << 10, 32},
}

// BenchmarkAppend measures acknowledged (fdatasynced) throughput through
// the group-committing Writer.
func BenchmarkAppend(b *testing.B) {
	for _, bc := range benchCases {
		b.Run(bc.name, func(b *testing.B) {
			dir := b.TempDir()
			w, err := wal.Create(wal.Options{Dir: dir}, 1)
			if err != nil {
				b.Fatal(err)
			}
			payloads := make([][]byte, bc.writers)
			for i := range payloads {
				payloads[i] = payloadOf(uint64(i), bc.size)
			}
			b.SetBytes(int64(bc.size))
			b.ResetTimer()
			var next sync.Mutex
			n := 0
			var wg sync.WaitGroup
			for g := range bc.writers {
				wg.Go(func() {
					for {
						next.Lock()
						if n >= b.N {
							next.Unlock()
							return
						}
						n++
						next.Unlock()
						if err := w.Append(payloads[g]).Wait(); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkSequentialWriteFdatasync is the baseline: the same blocks
// written to a plain file, one write and one fdatasync each.
func BenchmarkSequentialWriteFdatasync(b *testing.B) {
	for _, size := range []int{4 << 20, 50 << 10} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), "plain"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			p := payloadOf(1, size)
			b.SetBytes(int64(size))
			b.ResetTimer()
			for range b.N {
				if _, err := f.Write(p); err != nil {
					b.Fatal(err)
				}
				if err := unix.Fdatasync(int(f.Fd())); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
