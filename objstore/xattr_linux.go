//go:build linux

package objstore

import (
	"errors"

	"golang.org/x/sys/unix"
)

func setXattr(path, attr string, value []byte) error {
	return unix.Lsetxattr(path, attr, value, 0)
}

func getXattr(path, attr string) ([]byte, error) {
	buf := make([]byte, 64)
	n, err := unix.Lgetxattr(path, attr, buf)
	if errors.Is(err, unix.ENODATA) {
		return nil, errXattrMissing
	}
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}
