// Package gcfloor keeps the Go GC's heap goal from falling below a floor.
//
// With GOGC at 100 the GC runs each time the heap doubles its live data.
// Apron's buffer lives off the Go heap, so an idle or query-serving
// server has a live heap of a few MiB, and each collection comes after a
// few MiB of garbage: twenty collections a second under a stream of small
// queries, each one taking a core's share and assist time from the query
// that runs into it. Go has no minimum heap setting; this package gives
// one: after every collection it sets GOGC so that the next goal is at
// least the floor, or the configured GOGC when that is more. A large live
// heap (a persist, a big ingest) sees the configured GOGC unchanged, and
// the soft memory limit still bounds everything.
//
// The hook is the usual one for tuning the GC from within (a finalizer
// re-armed on an object each cycle frees); SetGCPercent does not stop
// the world.
package gcfloor
