package offheap

import (
	"fmt"
	"syscall"
)

func mapAnon(size int) ([]byte, bool) {
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_POPULATE)
	if err != nil {
		return nil, false
	}
	return b, true
}

func unmap(b []byte) {
	if err := syscall.Munmap(b); err != nil {
		// Only a slice this package did not map gets here: a bug in the
		// caller, which would otherwise leak or corrupt silently.
		panic(fmt.Sprintf("offheap: munmap of %d bytes: %v", len(b), err))
	}
}
