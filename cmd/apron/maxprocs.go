package main

import (
	"os"
	"runtime"
)

// queryExtraProcs is how many Ps the query engine adds to GOMAXPROCS while
// queries run (query.Config.ExtraProcs says why): one per DuckDB worker
// thread (queryThreads, 0 = one per core) beyond the one raiseProcs
// added, or none when GOMAXPROCS is set in the environment. Counting
// that one keeps the Ps of a query as they were before it (twice the
// cores on 2 cores): one more made an aggregate over 5M persisted rows
// 6-13% slower (p50 199 ms against 176-188).
func queryExtraProcs(queryThreads, cores int) int {
	if os.Getenv("GOMAXPROCS") != "" {
		return 0
	}
	if queryThreads <= 0 {
		queryThreads = cores
	}
	return max(0, queryThreads-1)
}

// raiseProcs gives the server one P more than its cores (GOMAXPROCS by
// default, which Go sets from the machine and its cgroup CPU limit), and
// returns the cores; with GOMAXPROCS set in the environment it changes
// nothing. Parquet encoding takes at most the cores (buffer.Config.Cores),
// so the goroutines of a write's acknowledgement (gRPC, the WAL's commit,
// the buffer) always find a P while a segment persists with every core:
// with every P taken they waited for the Go scheduler to preempt an
// encoder, 10 ms each, several times an ack (persist/encode_slots.go has
// the figures). The kernel then shares the cores among the threads, in
// slices of a few ms.
func raiseProcs() (cores int) {
	cores = runtime.GOMAXPROCS(0)
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(cores + 1)
	}
	return cores
}
