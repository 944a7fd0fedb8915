// Package input turns files into Arrow record batches for `apron write`:
// CSV (and TSV), JSON Lines, InfluxDB line protocol, Parquet and Arrow IPC.
// Open returns a Reader whose Next yields Batches — a record, its table and
// where its rows are in the file — which the CLI sends with Flight DoPut.
// Every batch is owned by the caller, which releases it.
//
// # Formats and what they map to
//
//   - CSV/TSV: a header row names the columns. Column types are inferred
//     (below) or given with --schema. RFC 4180 quoting: quoted fields may
//     hold delimiters, newlines and "" for a quote; CRLF and LF endings;
//     a UTF-8 BOM is dropped; blank lines are skipped (so a one-column file
//     cannot hold an empty value on a line of its own: quote it, ""). A
//     bare quote in an unquoted field, text after a closing quote, a quote
//     never closed and a row with more or fewer fields than the header are
//     errors. CR-only line endings are not supported, nor rows over 64
//     MiB. String values must be UTF-8. TSV is the same with tabs, quoting
//     included (as Excel writes it).
//   - JSON Lines: one object per line (blank lines skipped); keys are
//     columns, in the order they first appear. Numbers are int64 when
//     every sampled value is integral, else float64; strings, bools;
//     nested objects and arrays are kept as their JSON text in a string
//     column (the server has no nested types; a string keeps the data).
//     A string column takes any value as its JSON text, so --schema
//     k:string always works. A key first seen after the sample adds a
//     column: the batch in progress goes out and the next one has the
//     wider schema (batches of one file may differ in schema). Such a
//     late key takes the type of its first non-null value, numbers as
//     float64 since one value cannot tell int from float. null is a null
//     value; a key missing from a line is null.
//   - Line protocol: measurement → Batch.Table; tags → string columns;
//     fields → float64 (1.5), int64 (1i), uint64 (1u), string ("a"),
//     bool; the timestamp, read with --precision, → "time". A line
//     without a timestamp gets the time it is parsed at (time.Now), as
//     InfluxDB stamps on arrival. Each measurement has its own batch in
//     progress, sent at BatchRows rows and at the end of the file, so
//     batches of different tables are not in file order (those of one
//     table are). A tag or field first seen later is a new nullable
//     column (earlier rows of the batch get nulls; later batches of the
//     table carry only the columns their rows have). A field keeps the
//     type of its first appearance in the whole file: a change is an
//     error, as InfluxDB refuses it. A tag and a field may not share a
//     name, and neither may be named "time". Escapes, comments and blank
//     lines are the decoder's (github.com/influxdata/line-protocol/v2).
//     --time-column, --time-format and --schema do not apply.
//   - Parquet: streamed with pqarrow, BatchRows rows at a time, row group
//     after row group, through a buffered stream, columns decoded in
//     parallel: memory is bounded by a batch plus a buffer per column,
//     never the whole file. Types are kept (the server maps them), but a
//     string column the file dictionary-encodes throughout comes as
//     dictionary<int32, utf8> (see dictColumns).
//   - Arrow IPC: a file (ARROW1 magic, read through its footer) or a
//     stream. Batches larger than BatchRows are cut into zero-copy
//     slices; types are kept.
//
// Parquet files and Arrow IPC files need random access. Open reads an
// io.ReaderAt+io.Seeker that can seek (a regular *os.File) in place, with
// ReadAt from offset 0; anything else (stdin, a pipe) is first copied to
// a temporary file, removed by Close, and Open returns once the copy is
// done. The sequential formats (and Arrow streams) are read from r's
// current position and never spooled.
//
// A UTF-8 byte order mark at the start of a text file is dropped.
//
// # Type inference (CSV, JSONL)
//
// The types come from the first 1000 data rows (lines for JSONL). A CSV
// column is int64 if every non-empty sampled value is a decimal integer
// that fits, float64 if every one is a number and some are not integers
// (or are integers too large for int64), bool if every one is true or
// false (any case), else string; a column with no value in the sample is
// a string. An empty CSV field is null. "nan" and "inf" are not inferred
// as numbers, but a float64 column parses them.
//
// Timestamps are inferred for the time column only: a column of other
// date-like text stays a string unless --schema says timestamp, because a
// wrong guess would fail the file later where a string never does. Every
// timestamp column is parsed with --time-format.
//
// A value after the sample that does not parse as its column's type is an
// *Error naming the file, line, column and value, with the --schema entry
// that would hold it. --schema "name:type,…" overrides inferred types;
// types are string, int64, uint64, float64, bool, timestamp (aliases: str,
// text, int, integer, long, uint, float, double, number, boolean, time,
// datetime). A CSV --schema entry must name a header column; a JSONL one
// may name a key that appears only later.
//
// # Time
//
// The column named by --time-column (or else one named "time") becomes
// the column "time", timestamp[ns, tz=UTC]. None: the batches have no time
// column and the server stamps the rows. A file with both a "time" column
// and another --time-column is refused. In CSV and JSONL every row needs a
// time (an empty or missing one is an error: the server refuses null
// times).
//
// --time-format:
//   - "" (auto): RFC 3339 / ISO 8601 text — YYYY-MM-DD, then optionally
//     T or a space, hh:mm, :ss, a fraction to the nanosecond, and a zone
//     (Z, ±hh:mm, ±hhmm, ±hh); no zone means UTC; a bare date is midnight
//     UTC — or an epoch number whose unit follows from its magnitude:
//     below 1e11 seconds, below 1e14 milliseconds, below 1e17 microseconds,
//     else nanoseconds. That reads every time from 1973 to 5138 right in
//     each unit; a decimal fraction is allowed (seconds.fraction).
//   - "rfc3339": the text forms only.
//   - "s", "ms", "us", "ns": an epoch number in that unit.
//   - anything else: a Go time layout (time.Parse; no zone in the layout
//     means UTC).
//
// For Parquet and Arrow, a timestamp or date time column is only renamed
// (its unit and zone are kept; the server converts); an integer one is
// converted with --time-format's unit (auto: by magnitude), a string one
// parsed as above.
//
// # The CSV pipeline
//
// CSV is the format of big files, so it is parsed on every core:
//
//	file ─▶ splitter ──chunks──▶ workers (GOMAXPROCS) ──▶ Next, in file order
//
// The splitter goroutine reads the file in large reads and cuts it into
// chunks of exactly BatchRows rows: a newline ends a row when the number
// of quotes since the row began is even, found with IndexByte and Count
// per line (vectorized), with no field parsing; it counts lines too, so
// each chunk knows its first line. Each chunk's result channel is queued
// on an ordered channel before the chunk goes to the workers; Next takes
// results from that queue, so batches leave in file order whatever order
// the workers finish in, and the queue's capacity bounds the chunks in
// flight to about workers+2. A worker scans fields in place
// (no string or []string per row; a quoted field with "" is unescaped into
// a reused scratch buffer), parses numbers and times where it scans them
// (float64 by an exact fast path for ≤15 digits, eight digits at a time,
// eiselLemire up to 19, else strconv; RFC 3339 times of the common form
// with the date's day number kept from the row before, others by
// parseISO), writes fixed-width values straight into Arrow buffers sized
// from the splitter's row count and strings into offset and data buffers
// sized from the sample's average length (fixedCol, stringCol: no
// array.Builder per value), and counts lines itself, so an error names
// its exact line even across quoted newlines. A malformed quote makes the
// splitter's parity wrong from there on, but the parser meets the fault
// first, in order; a row longer than 64 MiB (a quote never closed) stops
// the splitter, and the parser reports where the quote opened. Chunk
// buffers are recycled. Close stops every goroutine and releases the
// batches parsed ahead. With Options.DictionaryStrings (the CLI's), a
// string column whose sample holds at most one distinct value in four
// rows comes out dictionary<int32, utf8>, each batch with a dictionary
// of its own in first-seen order (dictCol): `apron write` of
// BenchmarkCLI's CSV then took ~5% less CPU, client and server together.
//
// JSONL and line protocol are parsed on the caller's goroutine (JSONL
// with a scanner written for flat objects, line protocol with the
// influxdata decoder over blocks of whole entries, whose boundaries a
// small scanner finds so that each entry's line is known).
//
// # Errors
//
// A malformed input is an *Error: file, line (text formats) or row
// (Parquet/Arrow), column when there is one, and the cause, which wraps
// ErrSyntax, ErrType or ErrSchema. It prints as
//
//	data.csv:17: column "usage": "abc" is not a float64 (the column's type was inferred from the first 1000 rows; set it with --schema usage:string)
//
// Next returns the error after the batches before it; it is sticky.
package input
