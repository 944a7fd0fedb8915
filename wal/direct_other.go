//go:build !linux

package wal

import "errors"

// OpenDirect is not supported here: the Writer writes through the page
// cache.
func (osFS) OpenDirect(string) (DirectFile, error) {
	return nil, errors.New("direct I/O is only used on Linux")
}
