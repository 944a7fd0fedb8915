package integration

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// BenchmarkAuthOverhead measures what authentication costs writers, auth
// off and on in the same run, each on its own server: 32 writers of
// 1,000-row batches waiting for each acknowledgement (rows/s; target:
// within 3%), and one such writer's acknowledgement latency (p50, p99;
// target: +0.1 ms at most). With auth on, every call carries a bearer
// token checked by the server; a DoPut stream's token is re-checked at
// every batch.
func BenchmarkAuthOverhead(b *testing.B) {
	type target struct {
		addr string
		ctx  context.Context
	}
	off := startServer(b, b.TempDir(), "--buffer-mem-limit", "16GiB")
	on := startAuthServer(b, b.TempDir(), "--buffer-mem-limit", "16GiB")
	tok, _ := makeToken(b, flightClient(b, on.Addr), on.Admin, []any{perm("bench", "write")}, "")
	targets := []struct {
		name string
		target
	}{
		{"auth=off", target{off.Addr, context.Background()}},
		{"auth=on", target{on.Addr, bearer(context.Background(), tok)}},
	}
	for _, tc := range targets {
		b.Run("32-writers/"+tc.name, func(b *testing.B) {
			rowsPerSec, _ := smallWriters(b, tc.addr, tc.ctx, 32, max(1, b.N))
			b.ReportMetric(rowsPerSec, "rows/s")
		})
	}
	for _, tc := range targets {
		b.Run("1-writer-ack/"+tc.name, func(b *testing.B) {
			lat := ackLatencies(b, tc.addr, tc.ctx, max(1, b.N))
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}

// openWriter opens a plain Flight DoPut stream into bench.small.
func openWriter(b *testing.B, addr string, ctx context.Context) (flight.FlightService_DoPutClient, *flight.Writer) {
	stream, err := flightClient(b, addr).DoPut(ctx)
	if err != nil {
		b.Fatal(err)
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(benchSchema))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"bench", "small"}})
	return stream, w
}

// smallWriters has clients writers, each on its own connection, send n
// 1,000-row batches each, each waiting for its acknowledgement, and
// returns rows/s and the seconds it took.
func smallWriters(b *testing.B, addr string, ctx context.Context, clients, n int) (float64, float64) {
	const rows = 1000
	recs := make([]arrow.RecordBatch, clients)
	for i := range recs {
		recs[i] = benchBatch(memory.DefaultAllocator, i*rows, rows)
	}
	defer release(recs...)
	type writer struct {
		stream flight.FlightService_DoPutClient
		w      *flight.Writer
	}
	ws := make([]writer, clients)
	for i := range ws {
		ws[i].stream, ws[i].w = openWriter(b, addr, ctx)
	}
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n {
				if err := ws[i].w.Write(recs[i]); err != nil {
					errs <- err
					return
				}
				if _, err := ws[i].stream.Recv(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	for _, w := range ws {
		w.w.Close()
		w.stream.CloseSend()
	}
	return float64(clients*n*rows) / secs, secs
}

// ackLatencies has one writer send n 1,000-row batches, each waiting for
// its acknowledgement, and returns the latencies sorted.
func ackLatencies(b *testing.B, addr string, ctx context.Context, n int) []time.Duration {
	rec := benchBatch(memory.DefaultAllocator, 0, 1000)
	defer rec.Release()
	stream, w := openWriter(b, addr, ctx)
	defer stream.CloseSend()
	defer w.Close()
	lat := make([]time.Duration, 0, n)
	b.ResetTimer()
	for range n {
		t0 := time.Now()
		if err := w.Write(rec); err != nil {
			b.Fatal(err)
		}
		if _, err := stream.Recv(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	return lat
}
