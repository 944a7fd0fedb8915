//go:build !unix

// Package cputime reads the process's CPU time, for benchmarks that
// report CPU per row or per byte beside wall-clock rates.
package cputime

import "time"

// Process is not measured here: it is 0.
func Process() time.Duration { return 0 }
