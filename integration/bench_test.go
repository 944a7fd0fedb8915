package integration

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
)

// The benchmarks of the ingest issue. Run them with
//
//	go test -run '^$' -bench . -benchtime 5x ./integration/
//
// Each compares Apron (the real binary, over loopback) with references run
// in the same process and on the same disk.

// benchSchema: 8 columns, as the issue asks: time, two tags, five fields.
var benchSchema = arrow.NewSchema([]arrow.Field{
	{Name: "time", Type: &arrow.TimestampType{Unit: arrow.Nanosecond}},
	{Name: "host", Type: arrow.BinaryTypes.String},
	{Name: "region", Type: arrow.BinaryTypes.String},
	{Name: "usage_user", Type: arrow.PrimitiveTypes.Float64},
	{Name: "usage_system", Type: arrow.PrimitiveTypes.Float64},
	{Name: "usage_idle", Type: arrow.PrimitiveTypes.Float64},
	{Name: "load", Type: arrow.PrimitiveTypes.Float64},
	{Name: "requests", Type: arrow.PrimitiveTypes.Int64},
}, nil)

func benchBatch(mem memory.Allocator, start, n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, benchSchema)
	defer b.Release()
	regions := []string{"us-east-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-south-1"}
	base := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC).UnixNano()
	for i := start; i < start+n; i++ {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(base + int64(i)*1000))
		b.Field(1).(*array.StringBuilder).Append("host-" + strconv.Itoa(i%1000))
		b.Field(2).(*array.StringBuilder).Append(regions[i%len(regions)])
		b.Field(3).(*array.Float64Builder).Append(float64(i%100) / 3)
		b.Field(4).(*array.Float64Builder).Append(float64(i%50) / 7)
		b.Field(5).(*array.Float64Builder).Append(float64(i%10) * 1.5)
		b.Field(6).(*array.Float64Builder).Append(float64(i%7) / 2)
		b.Field(7).(*array.Int64Builder).Append(int64(i))
	}
	return b.NewRecordBatch()
}

// benchServerArgs adds --metrics-addr $APRON_BENCH_METRICS_ADDR to a
// benchmark server's flags when that is set, to profile the server while
// it runs: curl http://$APRON_BENCH_METRICS_ADDR/debug/pprof/profile.
func benchServerArgs(args ...string) []string {
	if a := os.Getenv("APRON_BENCH_METRICS_ADDR"); a != "" {
		args = append(args, "--metrics-addr", a)
	}
	return args
}

func ipcBytes(tb testing.TB, rec arrow.RecordBatch) []byte {
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(rec.Schema()))
	if err := w.Write(rec); err != nil {
		tb.Fatal(err)
	}
	w.Close()
	return buf.Bytes()
}

// discardServer is a Flight SQL server whose bulk ingest reads every batch
// and throws it away: the cost of the protocol alone.
type discardServer struct{ flightsql.BaseServer }

func (*discardServer) DoPutCommandStatementIngest(_ context.Context, _ flightsql.StatementIngest, rdr flight.MessageReader) (int64, error) {
	var n int64
	for rdr.Next() {
		n += rdr.RecordBatch().NumRows()
	}
	return n, rdr.Err()
}

func startDiscardServer(tb testing.TB) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(maxMsgSize))
	flight.RegisterFlightServiceServer(srv, flightsql.NewFlightServer(&discardServer{}))
	go srv.Serve(lis)
	tb.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// BenchmarkBulkIngest streams 8-column batches of 64k rows over loopback
// with Flight SQL bulk ingest (what ADBC adbc_ingest sends) into Apron with
// --wal-sync fsync, next to (a) a Flight DoPut server that discards them and
// (b) writing the same IPC bytes to a file with fdatasync after each batch.
// Target: Apron at least 70% of the lower of (a) and (b).
func BenchmarkBulkIngest(b *testing.B) {
	const rows, batches = 65536, 16
	mem := memory.DefaultAllocator
	recs := make([]arrow.RecordBatch, batches)
	var size int64
	for i := range recs {
		recs[i] = benchBatch(mem, i*rows, rows)
		size += int64(len(ipcBytes(b, recs[i])))
	}
	defer release(recs...)
	report := func(b *testing.B, start time.Time) {
		secs := time.Since(start).Seconds()
		b.ReportMetric(float64(b.N*rows*batches)/secs, "rows/s")
		b.ReportMetric(float64(int64(b.N)*size)/secs/1e6, "MB/s")
	}
	ingest := func(b *testing.B, addr string) {
		c := sqlClient(b, addr, nil)
		ctx := context.Background()
		b.ResetTimer()
		start := time.Now()
		for range b.N {
			n, err := sqlIngest(ctx, c, "bench", "cpu", recs...)
			if err != nil || n != rows*batches {
				b.Fatalf("ingest: %d rows, %v", n, err)
			}
		}
		report(b, start)
	}
	b.Run("apron-fsync", func(b *testing.B) {
		s := startServer(b, b.TempDir(), benchServerArgs("--buffer-mem-limit", "16GiB")...)
		ingest(b, s.Addr)
	})
	// Not a reference of the issue: the same server without fsync, to
	// show how much of apron-fsync's time is the disk's.
	b.Run("apron-wal-none", func(b *testing.B) {
		s := startServer(b, b.TempDir(), benchServerArgs("--buffer-mem-limit", "16GiB", "--wal-sync", "none")...)
		ingest(b, s.Addr)
	})
	b.Run("discard-doput", func(b *testing.B) {
		ingest(b, startDiscardServer(b))
	})
	b.Run("write-fdatasync", func(b *testing.B) {
		blobs := make([][]byte, batches)
		for i, r := range recs {
			blobs[i] = ipcBytes(b, r)
		}
		f, err := os.Create(filepath.Join(b.TempDir(), "seq"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		b.ResetTimer()
		start := time.Now()
		for range b.N {
			for _, blob := range blobs {
				if _, err := f.Write(blob); err != nil {
					b.Fatal(err)
				}
				if err := unix.Fdatasync(int(f.Fd())); err != nil {
					b.Fatal(err)
				}
			}
		}
		report(b, start)
	})
}

// BenchmarkSmallWriters runs 32 concurrent clients, each on its own
// connection, each writing 1,000-row batches with plain Flight DoPut and
// waiting for each batch's acknowledgement before sending the next. It
// reports rows/s and the WAL's fsyncs/s (from /metrics).
// Target: at least 1,000,000 rows/s on a 2-core machine.
func BenchmarkSmallWriters(b *testing.B) {
	const clients, rows = 32, 1000
	s := startServer(b, b.TempDir(), "--buffer-mem-limit", "16GiB", "--metrics-addr", "127.0.0.1:0")
	metricsAddr := regexp.MustCompile(`metrics_addr=(\S+)`).FindStringSubmatch(s.Stderr())
	if metricsAddr == nil {
		b.Fatalf("no metrics_addr in the ready line:\n%s", s.Stderr())
	}
	perClient := max(1, b.N)
	syncs0 := scrapeCounter(b, metricsAddr[1], "apron_wal_fsyncs_total")
	rowsPerSec, secs := smallWriters(b, s.Addr, context.Background(), clients, perClient)
	syncs := scrapeCounter(b, metricsAddr[1], "apron_wal_fsyncs_total") - syncs0
	total := float64(clients * perClient * rows)
	b.ReportMetric(rowsPerSec, "rows/s")
	b.ReportMetric(syncs/secs, "fsyncs/s")
	b.ReportMetric(total/syncs, "rows/fsync")
}

func scrapeCounter(tb testing.TB, addr, name string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, name+" ") {
			v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(line, name)), 64)
			if err != nil {
				tb.Fatal(err)
			}
			return v
		}
	}
	tb.Fatalf("metric %s not found at %s", name, addr)
	return 0
}
