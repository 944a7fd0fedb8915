package wal

import (
	"os"
	"syscall"
)

// OpenDirect opens an existing file for writing with O_DIRECT. It fails
// where the file system has no direct I/O (tmpfs: EINVAL).
func (osFS) OpenDirect(name string) (DirectFile, error) {
	return os.OpenFile(name, os.O_WRONLY|syscall.O_DIRECT, 0)
}
