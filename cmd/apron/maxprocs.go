package main

import (
	"os"
	"runtime"
)

// queryExtraProcs is how many Ps the query engine adds to GOMAXPROCS while
// queries run (query.Config.ExtraProcs says why): one per DuckDB worker
// thread (queryThreads, 0 = one per core), or none when GOMAXPROCS is set
// in the environment.
func queryExtraProcs(queryThreads int) int {
	if os.Getenv("GOMAXPROCS") != "" {
		return 0
	}
	if queryThreads <= 0 {
		return runtime.GOMAXPROCS(0)
	}
	return queryThreads
}
