package persist

import "syscall"

const lowerThreadSupported = true

// lowerThread sets the nice value of the calling thread (Linux gives each
// thread its own) to nice; the caller has locked its goroutine to it.
func lowerThread(nice int) error {
	return syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), nice)
}

// threadNice is the calling thread's nice value.
func threadNice() (int, error) {
	// The raw syscall returns 20-nice, so that it is never negative
	// (getpriority(2), "C library/kernel differences").
	p, err := syscall.Getpriority(syscall.PRIO_PROCESS, syscall.Gettid())
	return 20 - p, err
}
