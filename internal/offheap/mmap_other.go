//go:build !linux

package offheap

func mapAnon(size int) ([]byte, bool) { return nil, false }

func unmap(b []byte) {}
