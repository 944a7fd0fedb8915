package main

import (
	"os"
	"runtime"
)

// setMaxProcs gives the Go scheduler a P for each core plus one for each
// DuckDB worker thread (queryThreads, 0 = one per core), unless GOMAXPROCS
// is set in the environment. DuckDB's threads call into Go (apron_scan
// fills every vector of a query from the buffer) and each call needs a P:
// with only one P per core, a worker waits for one whenever Go's own
// goroutines (gRPC, the result stream, the GC) hold them all. Measured on
// 2 cores, BenchmarkSQLAggregate (10M rows): apron/DuckDB 1.48-1.52 with
// GOMAXPROCS 2, 1.35-1.37 with 4. It returns the value in force.
func setMaxProcs(queryThreads int) int {
	if os.Getenv("GOMAXPROCS") != "" {
		return runtime.GOMAXPROCS(0)
	}
	n := runtime.GOMAXPROCS(0) // Go's default: the cores (or CPU quota) it may use
	if queryThreads <= 0 {
		queryThreads = n
	}
	runtime.GOMAXPROCS(n + queryThreads)
	return n + queryThreads
}
