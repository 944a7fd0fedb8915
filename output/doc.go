// Package output writes query results, a stream of Arrow record batches of
// one schema, in the formats of `apron query --format`: table, csv, json,
// jsonl, arrow and parquet. New returns a Writer; the caller Writes each
// batch as it arrives and Closes the writer at the end of the stream.
//
// # Formats
//
// table: duckdb's box ("duckbox"): a box of Unicode rules, a row of column
// names and a row of type names (varchar, int64, double, boolean, date,
// timestamp_ns, timestamptz_ms, decimal(10,3), int64[], struct(…), map(…):
// duckdb's name for what it would read the column as), then the rows;
// numbers right-aligned, everything else left-aligned, NULL as NULL. Under
// the box a footer: "100 rows (40 shown)  9 columns (5 shown) in 0.012 s"
// (the parentheses only when something is left out, the time only with
// Options.Elapsed). An empty result is the header box and "0 rows".
// Nothing is printed before Close: the widths depend on every row shown.
//
// csv: RFC 4180 with LF line ends, a header line of the column names.
// NULL is the empty field; the empty string is "" (quoted), so that the two
// differ; a field with a comma, quote, CR or LF is quoted, quotes doubled.
//
// json: one array, an object a line: [\n{"time":…,"host":…},\n…\n]\n, or
// []\n for no rows. jsonl: an object a line, nothing else (no rows: no
// output). Keys are the column names in column order (duplicate names are
// kept: JSON allows them, readers keep the last). Both are streamed: a row
// is written once formatted, never the whole result held.
//
// arrow: the Arrow IPC stream format, batches as they come, uncompressed:
// pyarrow.ipc.open_stream, DuckDB and every Arrow library read it. Every
// Arrow type passes unchanged; batches of no rows are left out.
//
// parquet: one Parquet file by arrow-go (see parquetWriter): zstd, format
// 2.6 (timestamp[ns] is TIMESTAMP(NANOS) and reads back as timestamp[ns] in
// pyarrow, TIMESTAMP_NS in DuckDB), the Arrow schema stored, row groups of
// at most 1Mi rows or 64 MiB of Arrow data, each column's encoding chosen
// from the first rows (parquet_plan.go: dictionaries for repeated values,
// DELTA_BINARY_PACKED for times and distinct integers, BYTE_STREAM_SPLIT
// for distinct floats), the columns of a row group encoded in parallel.
// string_view/binary_view become utf8/binary; duration, intervals,
// fixed-size lists, list views and unions, which pqarrow cannot write,
// become utf8 columns of CSV text.
//
// # Values
//
// One renderer (cell.go) spells values for table, csv and json alike, in
// three styles that differ only where a format needs it:
//
//	               table                      csv                          json
//	integers       -12                        -12                          -12 (a number, int64 and uint64 too)
//	floats         0.1  1234567.5  1e+21      same                         same; NaN, ±Inf: null
//	               NaN, ±Inf: nan inf -inf
//	decimals       12.340 (at its scale)      same                         a number: 12.340
//	boolean        true false                 same                         same
//	text           escaped (see below)        as is                        a string (invalid UTF-8: U+FFFD)
//	binary         ab\x00\xff (duckdb blob)   base64 (standard, padded)    base64 string
//	timestamp      2026-01-05 12:00:00.123    2026-01-05T12:00:00.123Z     "2026-01-05T12:00:00.123Z"
//	  with zone    2026-01-05 12:00:00+00     same as without              same as without
//	date           2026-01-05                 same                         string
//	time           12:00:00.500               same                         string
//	duration       1 day 02:03:04.500         same                         string
//	interval       1 year 2 months 3 days 04:05:06, same                   string
//	               00:00:00 when zero
//	list/struct    JSON text: [1,null]        JSON text, quoted as needed  JSON: [1,null], {"a":1}
//	map            JSON object, keys as text  same                         same
//	dictionary     as its values; run-end encoded as its values; unions as the selected child's value
//	other types    the array's ValueStr (a string in json): nothing fails to render
//
// Timestamps are in UTC (a zoned timestamp's instant; a zoneless one as
// stored), in the proleptic Gregorian calendar with any year (+10000-01-01,
// -0001-12-31). Fractions of a second (timestamps, times, durations) are
// printed in groups of three digits, as few as represent the value
// exactly: :00, :00.100, :00.123456, :00.123456789 — no digit is lost and
// a column of milliseconds lines up. Floats are the shortest text that
// reads back to the same float (strconv), without exponent for
// 1e-6 <= |f| < 1e21, with one outside (JavaScript's rule); an integral
// float prints without ".0".
//
// # Terminal escaping
//
// Values are hostile: the table prints them to a terminal, so nothing in a
// value may move the cursor, end the line, set colours or the window
// title, or reorder the text after it. Before a table value is measured:
// C0 controls become \n \t \r \a \b \v \f \e or \xNN, DEL \x7f, C1 controls
// (the 8-bit CSI among them) and U+2028, U+2029 and the bidi controls
// (U+061C, U+200E/F, U+202A-E, U+2066-9) \uXXXX, each byte of invalid UTF-8
// \xNN. A backslash is left as it is (the table is for reading; csv and
// json are the exact forms). Column names and type names are escaped the
// same way. JSON output escapes the same characters as \uXXXX, so it is
// terminal-safe too; CSV carries values byte for byte, so a hostile value
// reaches a terminal that CSV is printed to (the command should say so, or
// send CSV to a file).
//
// Widths are terminal columns, measured by grapheme cluster with
// github.com/rivo/uniseg: East Asian wide characters and emoji count two,
// combining marks zero, a cut never splits a cluster.
//
// # Cutting the table to the terminal
//
// Each value is cut to 40 columns (and 1 KiB) with "…" when it is stored.
// If the box is still wider than Options.Width, columns wider than 20 are
// capped at one common width, as wide as fits (duckdb's rule); if even 20
// is too wide, columns are left out from the middle outwards, right of the
// middle first (the first column, often the time, is the last to go),
// with a one-wide "…" column in their place, and the space that frees goes
// back to the columns shown, left to right. As a last resort (a terminal
// narrower than one column) every line is cut to the width. The layout
// depends only on the widths, so the same result always looks the same.
//
// # Memory
//
// No writer holds the result. table keeps the first ceil(MaxRows/2) rows
// and a ring of the last floor(MaxRows/2) as cut strings (at most MaxRows
// × columns × 1 KiB), renders only the rows that can still be shown (of a
// batch, at most its last floor(MaxRows/2) past the head) and never
// retains a batch. csv and json hold up to GOMAXPROCS chunks of 4096 rows
// of text: a large batch is formatted by that many goroutines at once, all
// joined before Write returns (formatting floats is most of an export's
// CPU). arrow writes each batch through. parquet holds the batches of two
// row groups (the one being gathered, the one being encoded: at most 1Mi
// rows or 64 MiB of Arrow buffers each) and the encoded column chunks of
// one.
//
// # Errors
//
// Write refuses a batch whose column types are not the schema's (names,
// nullability and metadata may differ: the arrow and parquet writers
// relabel such a batch with the writer's schema). An error of the
// io.Writer is returned, wrapped, by the Write or Close that meets it, and
// by every later one; Close releases every buffer even then. Close does
// not close the io.Writer.
package output
