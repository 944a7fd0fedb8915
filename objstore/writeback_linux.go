//go:build linux

package objstore

import "golang.org/x/sys/unix"

const writebackSupported = true

// startWriteback waits for the writeback of the file's first off bytes
// already under way, then starts that of the rest of them (pebble's
// SyncTo: SYNC_FILE_RANGE_WAIT_BEFORE|SYNC_FILE_RANGE_WRITE). Its error
// is ignored: the fsync that follows reports what matters.
func startWriteback(fd uintptr, off int64) {
	_ = unix.SyncFileRange(int(fd), 0, off, unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE)
}
