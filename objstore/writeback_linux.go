//go:build linux

package objstore

import "golang.org/x/sys/unix"

// StartWriteback is sync_file_range(WAIT_BEFORE|WRITE) over [0, end): it
// waits for the writeback of pages in that range already under way, then
// starts it on the pages still dirty there, without waiting for those.
func (f osFile) StartWriteback(end int64) error {
	return unix.SyncFileRange(int(f.Fd()), 0, end, unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE)
}
