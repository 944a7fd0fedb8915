package wal_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apron-db/apron/wal"
	"github.com/apron-db/apron/wal/waltest"
)

// TestRemovePaced checks that a file is shrunk a step at a time, each step
// synced, before it is removed; that a file of one step or less, a zero
// pace and a missing file are simply removed; and that a cancelled
// context removes what is left at once.
func TestRemovePaced(t *testing.T) {
	const step = 1000
	cases := []struct {
		name      string
		size      int64
		pace      wal.RemovePace
		cancelled bool
		truncates int
	}{
		{"steps", 10*step + 1, wal.RemovePace{Step: step}, false, 10},
		{"exact steps", 10 * step, wal.RemovePace{Step: step}, false, 9},
		{"one step", step, wal.RemovePace{Step: step}, false, 0},
		{"no pace", 10 * step, wal.RemovePace{}, false, 0},
		{"cancelled", 10 * step, wal.RemovePace{Step: step, Every: time.Hour}, true, 0},
		{"empty", 0, wal.RemovePace{Step: step}, false, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			name := filepath.Join(dir, "00000000000000000001.wal")
			if err := os.WriteFile(name, make([]byte, c.size), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if c.cancelled {
				cancel()
			}
			fsys := waltest.New(nil)
			if err := wal.RemovePaced(ctx, fsys, name, c.pace); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(name); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("the file is still there: %v", err)
			}
			if got := fsys.Count(waltest.OpTruncate); got != c.truncates {
				t.Errorf("%d truncations, want %d", got, c.truncates)
			}
			// Each step is synced before the next, at the size it left.
			syncs := fsys.Syncs()
			if len(syncs) != c.truncates {
				t.Fatalf("%d syncs, want one a truncation (%d)", len(syncs), c.truncates)
			}
			for i, s := range syncs {
				if want := c.size - int64(i+1)*step; s.Size != want {
					t.Errorf("sync %d at size %d, want %d", i, s.Size, want)
				}
			}
		})
	}
	t.Run("missing", func(t *testing.T) {
		err := wal.RemovePaced(context.Background(), waltest.New(nil), filepath.Join(t.TempDir(), "gone.wal"), wal.DefaultRemovePace)
		if err != nil {
			t.Fatalf("a missing file: %v, want no error", err)
		}
	})
	t.Run("failed truncate", func(t *testing.T) {
		name := filepath.Join(t.TempDir(), "00000000000000000001.wal")
		if err := os.WriteFile(name, make([]byte, 5*step), 0o644); err != nil {
			t.Fatal(err)
		}
		fsys := waltest.New(nil)
		fsys.FailNth(waltest.OpTruncate, 2, waltest.ErrInjected)
		err := wal.RemovePaced(context.Background(), fsys, name, wal.RemovePace{Step: step})
		if !errors.Is(err, waltest.ErrInjected) {
			t.Fatalf("got %v, want the injected failure", err)
		}
		if _, err := os.Stat(name); err != nil {
			t.Fatalf("a failed shrink must leave the file for the retry: %v", err)
		}
	})
	t.Run("paced", func(t *testing.T) {
		name := filepath.Join(t.TempDir(), "00000000000000000001.wal")
		if err := os.WriteFile(name, make([]byte, 5*step), 0o644); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := wal.RemovePaced(context.Background(), waltest.New(nil), name, wal.RemovePace{Step: step, Every: 20 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		// Four steps, each at least Every from the one before it.
		if d := time.Since(start); d < 80*time.Millisecond {
			t.Errorf("removed in %s: the steps were not paced (want ≥ 80ms)", d)
		}
	})
}
