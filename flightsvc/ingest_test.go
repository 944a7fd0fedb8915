package flightsvc

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/query"
	"github.com/apron-db/apron/wal"
	"github.com/apron-db/apron/wal/waltest"
)

// startInProcess serves the Flight service over gRPC on loopback, on a
// write buffer whose WAL writes through fsys (fault injection).
func startInProcess(t *testing.T, fsys wal.FS) string {
	t.Helper()
	addr, _ := startInProcessBuffer(t, fsys)
	return addr
}

// startInProcessBuffer is startInProcess that also gives the write buffer.
func startInProcessBuffer(t *testing.T, fsys wal.FS) (string, *buffer.WriteBuffer) {
	t.Helper()
	cfg := buffer.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.WALFS = fsys
	wb, err := buffer.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	qcfg := query.DefaultConfig()
	qcfg.CacheDir = filepath.Join(cfg.DataDir, "cache")
	eng, err := query.Open(wb, qcfg)
	if err != nil {
		wb.Close()
		t.Fatal(err)
	}
	sql, err := NewSQLServer(wb, eng, Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := NewGRPCServer(NewService(sql))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(func() {
		srv.Stop()
		sql.Close()
		eng.Close()
		wb.Close()
	})
	return lis.Addr().String(), wb
}

// openPathPut opens a plain Flight DoPut into db.t, under a 30 s deadline
// that tells a hang from an answer.
func openPathPut(t *testing.T, addr string) (context.Context, flight.FlightService_DoPutClient, *flight.Writer) {
	t.Helper()
	c, err := flight.NewClientWithMiddleware(addr, nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	stream, err := c.DoPut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(ackSchema))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"db", "t"}})
	return ctx, stream, w
}

var ackSchema = arrow.NewSchema([]arrow.Field{{Name: "time", Type: &arrow.TimestampType{Unit: arrow.Nanosecond}}, {Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil)

func ackBatch(n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, ackSchema)
	defer b.Release()
	for i := range n {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(time.Now().UnixNano()))
		b.Field(1).(*array.Int64Builder).Append(int64(i))
	}
	return b.NewRecordBatch()
}

// TestPlainWriterNotLeftHanging: a plain Flight writer that waits for each
// batch's acknowledgement before it sends the next gets the status of a
// batch whose WAL fsync failed, at once (before, the stream waited for a
// next message that such a client never sends: it hung forever). The
// 30 s bound only tells a hang from an answer.
func TestPlainWriterNotLeftHanging(t *testing.T) {
	fsys := waltest.New(wal.OSFS())
	addr := startInProcess(t, fsys)
	ctx, stream, w := openPathPut(t, addr)
	defer w.Close()
	rec := ackBatch(10)
	defer rec.Release()
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatalf("first batch: %v", err)
	}
	fsys.FailNth(waltest.OpSync, 1, syscall.ENOSPC)
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	_, err := stream.Recv() // the client sends nothing more
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("the writer got no answer: the stream hangs")
	}
	if st, _ := status.FromError(err); st.Code() != codes.Unavailable {
		t.Fatalf("second batch: %v, want UNAVAILABLE (the WAL failed)", err)
	}
	// Operators are told: writes NOT_SERVING, reads still SERVING.
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	watch, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: WriteHealthService})
	if err != nil {
		t.Fatal(err)
	}
	for {
		res, err := watch.Recv()
		if err != nil {
			t.Fatalf("health of writes never became NOT_SERVING: %v", err)
		}
		if res.Status == healthpb.HealthCheckResponse_NOT_SERVING {
			break
		}
	}
	if res, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || res.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("overall health after a WAL failure: %v %v, want SERVING (reads work)", res, err)
	}
}

// TestStreamingWriterGetsFailure: a writer that streams batches without
// waiting for acknowledgements gets the failed batch's status too, while
// batches still wait in the stream's window (a failure there once
// deadlocked the stream: the submitter held the lock the waiter needed).
func TestStreamingWriterGetsFailure(t *testing.T) {
	fsys := waltest.New(wal.OSFS())
	addr := startInProcess(t, fsys)
	ctx, stream, w := openPathPut(t, addr)
	rec := ackBatch(1000)
	defer rec.Release()
	fsys.FailNth(waltest.OpSync, 3, syscall.EIO)
	sent := make(chan struct{})
	defer func() { <-sent }() // before rec is released
	go func() {
		defer close(sent)
		defer w.Close()
		for range 200 {
			if w.Write(rec) != nil {
				return
			}
		}
	}()
	var acked int
	var err error
	for {
		_, err = stream.Recv()
		if err != nil {
			break
		}
		acked++
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("the writer got no answer: the stream hangs")
	}
	if st, _ := status.FromError(err); st.Code() != codes.Unavailable {
		t.Fatalf("after %d acknowledgements: %v, want UNAVAILABLE (the WAL failed)", acked, err)
	}
}
