//go:build !linux

package persist

import "errors"

const lowerThreadSupported = false

func lowerThread(int) error {
	return errors.New("persist: a thread's priority is only lowered on Linux")
}

func threadNice() (int, error) { return 0, nil }
