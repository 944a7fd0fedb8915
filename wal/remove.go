package wal

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"
)

// Deleting a large file at once frees all its blocks in one file-system
// transaction, and every fdatasync that needs the journal (a WAL append
// grows its file, so each group commit does) waits for that transaction
// to commit. On ext4 mounted with discard, which is what apron was
// measured on, the commit also discards the freed blocks: deleting a
// persisted segment's 512 MiB WAL file stalled the acknowledgements of a
// writer meanwhile for 160-417 ms.
//
// RemovePaced therefore shrinks the file from its end in steps, each made
// durable on its own (so that each commit frees at most one step), with a
// pause between them that lets the WAL's group commits through, and only
// then removes what is left (RocksDB's and pebble's deletion pacing do
// the same for their table files). A crash part way leaves a shorter file
// that is still the WAL file of a persisted segment: startup deletes it
// before replay, as it deletes one the crash left whole.

// RemovePace is how RemovePaced shrinks a file.
type RemovePace struct {
	// Step is how much each truncation frees; 0 or less removes the file
	// at once.
	Step int64
	// Every is the least time from the start of one step to the start of
	// the next.
	Every time.Duration
}

// DefaultRemovePace frees 4 MiB a step, a step every 5 ms at most (about
// 1.2 s for 512 MiB measured): a writer's acknowledgement p99 stayed at
// 4-5 ms while a 512 MiB file was removed, against a stall of 190-310 ms
// for the whole file at once (one fdatasync'ing writer every 2 ms, ext4
// with discard on a virtio disk).
var DefaultRemovePace = RemovePace{Step: 4 << 20, Every: 5 * time.Millisecond}

// RemovePaced removes the file name of fsys, first shrinking it by pace
// (see above). Once ctx ends, what is left is removed at once. A missing
// file is not an error. The caller syncs the directory.
func RemovePaced(ctx context.Context, fsys FS, name string, pace RemovePace) error {
	if pace.Step > 0 {
		if err := shrink(ctx, fsys, name, pace); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("wal: shrinking %s before removing it: %w", name, err)
		}
	}
	if err := fsys.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// shrink truncates the file by pace.Step at a time, syncing each step,
// until at most one step is left or ctx ends.
func shrink(ctx context.Context, fsys FS, name string, pace RemovePace) error {
	f, err := fsys.OpenRW(name)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for size := fi.Size(); size > pace.Step; {
		if ctx.Err() != nil {
			return nil
		}
		start := time.Now()
		size -= pace.Step
		if err := f.Truncate(size); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
		if wait := pace.Every - time.Since(start); wait > 0 {
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			select {
			case <-timer.C:
			case <-ctx.Done():
				return nil
			}
		}
	}
	return nil
}
