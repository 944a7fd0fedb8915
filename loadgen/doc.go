// Package loadgen is Apron's load generator, the engine of `apron bench`:
// writers that stream synthetic CPU samples into a table and queriers that
// run a mix of SQL against it, for a fixed duration, reporting throughput
// and latency per interval and in a final summary. It knows nothing of the
// command line: it is given a dial function (one Flight SQL client per
// worker) and a context that carries the call headers (token, database).
//
// # Data
//
// Every writer fills the table of Schema: time, host, region, five float64
// fields (usage_user, usage_system, usage_iowait, usage_idle, load1) and an
// int64 counter (requests). Hosts are HostName(0) … HostName(Hosts-1), each
// in a fixed region; the queriers draw hosts from the same names. Writer w
// of W stamps its rows with nanosecond times ≡ w (mod W), increasing and
// following the wall clock, so no two rows of a run share a time and every
// (time, host) is unique across writers and across runs on one clock.
//
// The string and float columns of a batch come from a few templates built
// once per writer and shared by reference; only the time and counter
// columns are filled per batch. The generator costs a few nanoseconds a
// row (BenchmarkGenerator), far below what a server ingests, so a run
// measures the server and the wire, not the generator.
//
// # Writing
//
// ModePut (the default) is one plain Flight DoPut per writer with a PATH
// descriptor [db, table], kept open for the whole run. Batches are
// pipelined: up to InFlight are sent before the first is acknowledged. The
// server answers each batch, once durable, with a PutResult whose
// app_metadata is an apron.v1.PutResultMetadata; acknowledgements come in
// order, so the latency of a batch is the time from the start of its send
// to its PutResult. A stream that fails counts every unacknowledged batch
// as an error and is reopened after a backoff.
//
// ModeIngest is a Flight SQL CommandStatementIngest (create_append) per
// batch, one call at a time per writer, as ADBC bulk ingest sends it: the
// latency is the whole call.
//
// Bytes are the Arrow IPC bytes handed to gRPC (FlightData header, body
// and app metadata), not counting gRPC and HTTP/2 framing.
//
// # Querying
//
// Each querier runs the queries of the mix in turn (querier i starts at
// query i), each as Flight SQL Execute followed by DoGet of every endpoint,
// reading every batch; the latency is from Execute to the last batch. A
// query's SQL may hold {table} (the quoted "db"."table"), {db} and {host}
// (a host drawn at random per execution). Errors are counted by gRPC code.
//
// # Stopping
//
// A run ends when Duration has passed, when the writers have sent
// WriteConfig.Rows (if set), or when its context is cancelled. Writers
// then stop sending, close their streams and wait up to DrainTimeout for
// the acknowledgements still due, so that the rows reported acknowledged
// are exactly the rows the server holds from the run. In-flight queries
// are cancelled and counted nowhere. Every goroutine has returned when Run
// does, and every Arrow buffer it allocated from Config.Mem is released.
//
// # Soak
//
// A soak (apron bench soak) is a Run of writers and queriers with a
// Sampler beside it, scraping the server's /metrics every
// SoakConfig.Every for the series of DefaultSoakSeries (resident memory,
// buffered bytes, open fds, goroutines). JudgeGrowth leaves out the
// warm-up and compares the maximum of the last third of the samples with
// Factor times the maximum of the first third plus the series' slack:
// maxima, not means, so that the sawtooth of a buffer filling and
// persisting, or of the garbage collector, is flat. A metric not exposed
// fails too (it cannot be vouched for). CountTable and SoakVerdict check
// that the table holds every acknowledged row once: rows whose
// acknowledgement was lost may be there too, but no row twice (every row
// has a time of its own).
package loadgen
