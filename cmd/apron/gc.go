package main

import (
	"os"
	"runtime/debug"
	"strconv"
)

// defaultGOGC is the GC target apron runs with unless told otherwise. Go's
// default, 100, lets the heap grow to twice the live data between
// collections; Apron's live data is mostly the write buffer (up to
// --buffer-mem-limit), so the process would take twice the buffer's memory.
// Buffered data is pointer-free Arrow and Go slices, which a collection does
// not scan, so collecting more often costs little CPU. (VictoriaMetrics runs
// with GOGC=30 for the same reason.) Measured with BenchmarkPersist, a 1 GB
// segment: peak RSS 2.41x the buffered bytes at GOGC=100, 1.80x at 30.
const defaultGOGC = 30

// setGCPercent applies --gogc, or leaves a GOGC environment variable in
// force when the flag was not given. It returns the GOGC in force.
func setGCPercent(flagValue int, given bool) string {
	if env, ok := os.LookupEnv("GOGC"); ok && !given {
		return env
	}
	debug.SetGCPercent(flagValue)
	if flagValue < 0 {
		return "off"
	}
	return strconv.Itoa(flagValue)
}
