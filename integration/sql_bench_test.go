//go:build duckdb_arrow

package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
)

// The SQL benchmarks. Run them with, for example,
//
//	APRON_BENCH_ROWS=10000000 go test -tags duckdb_arrow -run '^$' -bench 'SQL' -benchtime 3x -timeout 30m ./integration/
//
// Each writes APRON_BENCH_ROWS rows (default 2M) of benchSchema's 8
// columns to a fresh Apron (bulk ingest, once) and, where it compares with
// it, to a reference DuckDB in the test process.

func sqlBenchRows(b *testing.B) int {
	if s := os.Getenv("APRON_BENCH_ROWS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("APRON_BENCH_ROWS=%q", s)
		}
		return n
	}
	return 2_000_000
}

const (
	sqlBenchHosts = 100
	sqlBenchBatch = 65536
)

// sqlBenchData is the data set of a benchmark: rows spread evenly over the
// 24 hours before it was made, host-<i%100>, one region per host.
type sqlBenchData struct {
	rows      int
	recs      []arrow.RecordBatch
	first     int64 // ns
	step      int64 // ns between rows
	last      int64
	apronAddr string
	ref       *refDuck
}

func makeSQLBenchData(b *testing.B, withRef bool) *sqlBenchData {
	b.Helper()
	n := sqlBenchRows(b)
	d := &sqlBenchData{rows: n}
	now := time.Now().UnixNano()
	d.step = max(1, int64(24*time.Hour)/int64(n))
	d.first = now - int64(n)*d.step
	d.last = d.first + int64(n-1)*d.step
	hosts := make([]string, sqlBenchHosts)
	for i := range hosts {
		hosts[i] = "host-" + strconv.Itoa(i)
	}
	regions := []string{"us-east-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-south-1"}
	mem := memory.DefaultAllocator
	for off := 0; off < n; off += sqlBenchBatch {
		m := min(sqlBenchBatch, n-off)
		bld := array.NewRecordBuilder(mem, benchSchema)
		for i := off; i < off+m; i++ {
			h := i % sqlBenchHosts
			bld.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(d.first + int64(i)*d.step))
			bld.Field(1).(*array.StringBuilder).Append(hosts[h])
			bld.Field(2).(*array.StringBuilder).Append(regions[h%len(regions)])
			bld.Field(3).(*array.Float64Builder).Append(float64(i%100) / 3)
			bld.Field(4).(*array.Float64Builder).Append(float64(i%50) / 7)
			bld.Field(5).(*array.Float64Builder).Append(float64(i%10) * 1.5)
			bld.Field(6).(*array.Float64Builder).Append(float64(i%7) / 2)
			bld.Field(7).(*array.Int64Builder).Append(int64(i))
		}
		d.recs = append(d.recs, bld.NewRecordBatch())
		bld.Release()
	}
	b.Cleanup(func() { release(d.recs...) })

	srv := startServer(b, b.TempDir(), benchServerArgs("--buffer-mem-limit", "16GiB", "--wal-sync", "none")...)
	d.apronAddr = srv.Addr
	c := sqlClient(b, srv.Addr, nil)
	start := time.Now()
	for off := 0; off < len(d.recs); off += 16 {
		part := d.recs[off:min(off+16, len(d.recs))]
		if _, err := sqlIngest(context.Background(), c, "db", "t", part...); err != nil {
			b.Fatalf("ingest: %v", err)
		}
	}
	b.Logf("%d rows ingested into Apron in %s", n, time.Since(start).Round(time.Millisecond))
	if withRef {
		start = time.Now()
		d.ref = newRefDuck(b)
		d.ref.exec(`CREATE SCHEMA db; CREATE TABLE db.t (time TIMESTAMP_NS, host VARCHAR, region VARCHAR,
			usage_user DOUBLE, usage_system DOUBLE, usage_idle DOUBLE, load DOUBLE, requests BIGINT)`)
		for _, r := range d.recs {
			d.ref.append("db", "t", r)
		}
		b.Logf("%d rows loaded into the reference DuckDB in %s", n, time.Since(start).Round(time.Millisecond))
	}
	return d
}

// drainArrow reads rdr to the end (and releases it): rows, bytes of the
// Arrow buffers, batches.
func drainArrow(b *testing.B, rdr array.RecordReader, err error) (rows, bytes, batches int64) {
	if err != nil {
		b.Fatal(err)
	}
	defer rdr.Release()
	for rdr.Next() {
		rec := rdr.RecordBatch()
		rows += rec.NumRows()
		batches++
		for _, c := range rec.Columns() {
			bytes += arrayBytes(c.Data())
		}
	}
	if err := rdr.Err(); err != nil {
		b.Fatal(err)
	}
	return rows, bytes, batches
}

func arrayBytes(d arrow.ArrayData) int64 {
	var n int64
	for _, buf := range d.Buffers() {
		if buf != nil {
			n += int64(buf.Len())
		}
	}
	for _, c := range d.Children() {
		n += arrayBytes(c)
	}
	if dict, ok := d.Dictionary().(*array.Data); ok && dict != nil {
		n += arrayBytes(dict)
	}
	return n
}

// flightSQLQuery runs sql with the Flight SQL client (Execute, then DoGet
// of the one endpoint) and returns the stream's reader.
func flightSQLQuery(ctx context.Context, c *flightsql.Client, sql string) (array.RecordReader, error) {
	info, err := c.Execute(ctx, sql)
	if err != nil {
		return nil, err
	}
	if len(info.Endpoint) != 1 {
		return nil, fmt.Errorf("%d endpoints, want 1", len(info.Endpoint))
	}
	return c.DoGet(ctx, info.Endpoint[0].Ticket)
}

// memFlightServer is a Flight SQL server that answers every query with the
// same batches, streamed from memory: the cost of the protocol alone. A
// query naming a number (SELECT 2048) cuts them into slices of that many
// rows.
type memFlightServer struct {
	flightsql.BaseServer
	recs []arrow.RecordBatch
}

func (s *memFlightServer) GetFlightInfoStatement(_ context.Context, cmd flightsql.StatementQuery, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	tkt, err := flightsql.CreateStatementQueryTicket([]byte(cmd.GetQuery()))
	if err != nil {
		return nil, err
	}
	return &flight.FlightInfo{
		Endpoint:         []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: tkt}}},
		FlightDescriptor: desc,
		Schema:           flight.SerializeSchema(s.recs[0].Schema(), memory.DefaultAllocator),
		TotalRecords:     -1,
		TotalBytes:       -1,
	}, nil
}

func (s *memFlightServer) DoGetStatement(ctx context.Context, tkt flightsql.StatementQueryTicket) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	step, _ := strconv.ParseInt(strings.TrimPrefix(string(tkt.GetStatementHandle()), "SELECT "), 10, 64)
	ch := make(chan flight.StreamChunk)
	go func() {
		defer close(ch)
		for _, r := range s.recs {
			st := step
			if st <= 0 {
				st = r.NumRows()
			}
			for off := int64(0); off < r.NumRows(); off += st {
				var part arrow.RecordBatch
				if off == 0 && st >= r.NumRows() {
					r.Retain()
					part = r
				} else {
					part = r.NewSlice(off, min(off+st, r.NumRows()))
				}
				select {
				case ch <- flight.StreamChunk{Data: part}:
				case <-ctx.Done():
					part.Release()
					return
				}
			}
		}
	}()
	return s.recs[0].Schema(), ch, nil
}

func startMemFlightServer(b *testing.B, recs []arrow.RecordBatch) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(maxMsgSize), grpc.MaxSendMsgSize(maxMsgSize))
	flight.RegisterFlightServiceServer(srv, flightsql.NewFlightServer(&memFlightServer{recs: recs}))
	go srv.Serve(lis)
	b.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// runThroughput runs query b.N times and reports result rows/s (or input
// rows/s when input > 0), MB/s of Arrow buffers received and batches per
// query. It returns the seconds per query.
func runThroughput(b *testing.B, input int, query func() (array.RecordReader, error)) float64 {
	var rows, bytes, batches int64
	start := time.Now()
	for b.Loop() {
		r, err := query()
		n, m, k := drainArrow(b, r, err)
		rows, bytes, batches = rows+n, bytes+m, batches+k
	}
	secs := time.Since(start).Seconds()
	if input > 0 {
		rows = int64(input) * int64(b.N)
	}
	b.ReportMetric(float64(rows)/secs, "rows/s")
	b.ReportMetric(float64(bytes)/secs/1e6, "MB/s")
	b.ReportMetric(float64(batches)/float64(b.N), "batches/op")
	return secs / float64(b.N)
}

// timeQuery runs one query to the end and returns how long it took.
func timeQuery(b *testing.B, query func() (array.RecordReader, error)) time.Duration {
	start := time.Now()
	r, err := query()
	drainArrow(b, r, err)
	return time.Since(start)
}

// BenchmarkSQLScan streams SELECT * of all the rows through Flight SQL
// (Execute + DoGet, every batch read) next to (a) the same query on a
// reference DuckDB in this process, its results read as Arrow, and (b) a
// Flight SQL server in this process streaming the same batches from
// memory, as ingested (64k rows) and cut to DuckDB's 2048-row vectors, as
// Apron sends them. Target: Apron at least 70% of the lower of (a) and
// (b, 64k).
func BenchmarkSQLScan(b *testing.B) {
	d := makeSQLBenchData(b, true)
	const q = "SELECT * FROM db.t"
	secs := map[string]float64{}
	b.Run("apron", func(b *testing.B) {
		c := sqlClient(b, d.apronAddr, nil)
		secs["apron"] = runThroughput(b, 0, func() (array.RecordReader, error) {
			return flightSQLQuery(context.Background(), c, q)
		})
	})
	b.Run("duckdb-ref", func(b *testing.B) {
		secs["ref"] = runThroughput(b, 0, func() (array.RecordReader, error) { return d.ref.query(q) })
	})
	memAddr := startMemFlightServer(b, d.recs)
	for _, step := range []int{0, 2048} {
		name := "flight-mem-64k"
		if step > 0 {
			name = fmt.Sprintf("flight-mem-%d", step)
		}
		b.Run(name, func(b *testing.B) {
			c := sqlClient(b, memAddr, nil)
			secs[name] = runThroughput(b, 0, func() (array.RecordReader, error) {
				return flightSQLQuery(context.Background(), c, fmt.Sprintf("SELECT %d", step))
			})
		})
	}
	// paired runs the three in turn in each iteration, so that the load of
	// a shared machine weighs on all alike; it reports Apron's throughput
	// as a percentage of the lower reference's.
	b.Run("paired", func(b *testing.B) {
		c := sqlClient(b, d.apronAddr, nil)
		mc := sqlClient(b, memAddr, nil)
		var ta, tr, tm time.Duration
		for b.Loop() {
			ta += timeQuery(b, func() (array.RecordReader, error) { return flightSQLQuery(context.Background(), c, q) })
			tr += timeQuery(b, func() (array.RecordReader, error) { return d.ref.query(q) })
			tm += timeQuery(b, func() (array.RecordReader, error) { return flightSQLQuery(context.Background(), mc, "SELECT 0") })
		}
		b.ReportMetric(ta.Seconds()/float64(b.N), "apron-s/op")
		b.ReportMetric(tr.Seconds()/float64(b.N), "ref-s/op")
		b.ReportMetric(tm.Seconds()/float64(b.N), "flight-mem-s/op")
		b.ReportMetric(100*max(tr, tm).Seconds()/ta.Seconds(), "apron-%-of-lower")
	})
	if secs["apron"] > 0 && secs["ref"] > 0 && secs["flight-mem-64k"] > 0 {
		low := max(secs["ref"], secs["flight-mem-64k"])
		b.Logf("%d rows: apron %.3fs, duckdb-ref %.3fs, flight-mem-64k %.3fs, flight-mem-2048 %.3fs: apron at %.0f%% of the lower reference (target 70%%)",
			d.rows, secs["apron"], secs["ref"], secs["flight-mem-64k"], secs["flight-mem-2048"], 100*low/secs["apron"])
	}
}

// BenchmarkSQLSelective reads one series over the last 5 minutes (a small
// fraction of the rows) through Flight SQL, 200 queries per op, with the
// time bound as a literal and relative to now() (now() is TIMESTAMP WITH
// TIME ZONE; now-cast casts it to TIMESTAMP). It reports p50 and p99.
// Target: p50 at most 20 ms. The now() forms see fewer rows as time
// passes after the data was written.
func BenchmarkSQLSelective(b *testing.B) {
	d := makeSQLBenchData(b, false)
	from := d.last - int64(5*time.Minute)
	queries := map[string]string{
		"literal":  "SELECT * FROM db.t WHERE host = 'host-7' AND time >= " + tsLiteral(from),
		"now":      "SELECT * FROM db.t WHERE host = 'host-7' AND time >= now() - INTERVAL 5 MINUTE",
		"now-cast": "SELECT * FROM db.t WHERE host = 'host-7' AND time >= now()::TIMESTAMP - INTERVAL 5 MINUTE",
	}
	for _, name := range []string{"literal", "now", "now-cast"} {
		b.Run(name, func(b *testing.B) { benchLatency(b, d.apronAddr, queries[name], 200) })
	}
}

// benchLatency runs sql per times per op through Flight SQL and reports
// its p50 and p99 and the rows of a query.
func benchLatency(b *testing.B, addr, sql string, per int) {
	benchLatencyOf(b, addr, func(int) string { return sql }, per)
}

// benchLatencyOf is benchLatency of the statements sql(0), sql(1), …
func benchLatencyOf(b *testing.B, addr string, sql func(i int) string, per int) {
	c := sqlClient(b, addr, nil)
	var lat []time.Duration
	var rows int64
	for b.Loop() {
		for range per {
			start := time.Now()
			r, err := flightSQLQuery(context.Background(), c, sql(len(lat)))
			n, _, _ := drainArrow(b, r, err)
			lat = append(lat, time.Since(start))
			rows += n
		}
	}
	slices.Sort(lat)
	ms := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) / 1e6
	}
	b.ReportMetric(ms(0.50), "p50-ms")
	b.ReportMetric(ms(0.99), "p99-ms")
	b.ReportMetric(float64(rows)/float64(len(lat)), "rows/query")
}

// BenchmarkSQLAggregate counts and averages per series per 1-minute
// bucket over all the rows, through Flight SQL and on the reference DuckDB
// (native tables). rows/s counts input rows. Target: Apron at most 1.5×
// the reference's time.
func BenchmarkSQLAggregate(b *testing.B) {
	d := makeSQLBenchData(b, true)
	const q = "SELECT host, time_bucket(INTERVAL '1 minute', time) AS b, count(*), avg(usage_user) FROM db.t GROUP BY ALL"
	secs := map[string]float64{}
	b.Run("apron", func(b *testing.B) {
		c := sqlClient(b, d.apronAddr, nil)
		secs["apron"] = runThroughput(b, d.rows, func() (array.RecordReader, error) {
			return flightSQLQuery(context.Background(), c, q)
		})
	})
	b.Run("duckdb-ref", func(b *testing.B) {
		secs["ref"] = runThroughput(b, d.rows, func() (array.RecordReader, error) { return d.ref.query(q) })
	})
	// paired runs both in turn in each iteration and reports the ratio.
	b.Run("paired", func(b *testing.B) {
		c := sqlClient(b, d.apronAddr, nil)
		var ta, tr time.Duration
		for b.Loop() {
			ta += timeQuery(b, func() (array.RecordReader, error) { return flightSQLQuery(context.Background(), c, q) })
			tr += timeQuery(b, func() (array.RecordReader, error) { return d.ref.query(q) })
		}
		b.ReportMetric(ta.Seconds()/float64(b.N), "apron-s/op")
		b.ReportMetric(tr.Seconds()/float64(b.N), "ref-s/op")
		b.ReportMetric(ta.Seconds()/tr.Seconds(), "apron/ref")
	})
	if secs["apron"] > 0 && secs["ref"] > 0 {
		b.Logf("%d rows: apron %.3fs, duckdb-ref %.3fs: apron at %.2f× the reference's time (target ≤ 1.5×)",
			d.rows, secs["apron"], secs["ref"], secs["apron"]/secs["ref"])
	}
}
