//go:build unix

// Package cputime reads the process's CPU time, for benchmarks that
// report CPU per row or per byte beside wall-clock rates (on a shared
// machine the CPU figure moves much less than the wall-clock one).
package cputime

import (
	"syscall"
	"time"
)

// Process is the process's user + system CPU time so far.
func Process() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
