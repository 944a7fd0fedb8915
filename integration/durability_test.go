package integration

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-adbc/go/adbc"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	apronpb "github.com/apron-db/apron/proto"
)

const (
	writersPerRound = 4
	rowsPerBatch    = 20
	maxInFlight     = 8 // batches a streaming writer sends ahead of their acks
)

var loadSchema = arrow.NewSchema([]arrow.Field{
	{Name: "time", Type: tsNs},
	{Name: "writer", Type: arrow.PrimitiveTypes.Int64},
	{Name: "seq", Type: arrow.PrimitiveTypes.Int64},
	{Name: "row", Type: arrow.PrimitiveTypes.Int64},
}, nil)

type batchKey struct{ writer, seq int64 }

// ledger records what the writers attempted and what the server
// acknowledged.
type ledger struct {
	mu        sync.Mutex
	attempted map[batchKey]bool
	acked     map[batchKey]bool
	table     map[int64]string // writer -> table
}

func newLedger() *ledger {
	return &ledger{attempted: map[batchKey]bool{}, acked: map[batchKey]bool{}, table: map[int64]string{}}
}

func (l *ledger) attempt(k batchKey) {
	l.mu.Lock()
	l.attempted[k] = true
	l.mu.Unlock()
}

func (l *ledger) ack(k batchKey) {
	l.mu.Lock()
	l.acked[k] = true
	l.mu.Unlock()
}

func loadBatch(mem memory.Allocator, writer, seq int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, loadSchema)
	defer b.Release()
	for r := int64(0); r < rowsPerBatch; r++ {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(baseTime + writer*int64(time.Hour) + seq*1000 + r))
		b.Field(1).(*array.Int64Builder).Append(writer)
		b.Field(2).(*array.Int64Builder).Append(seq)
		b.Field(3).(*array.Int64Builder).Append(r)
	}
	return b.NewRecordBatch()
}

// adbcWriter ingests one batch per ExecuteUpdate until a write fails or ctx
// ends.
func adbcWriter(ctx context.Context, t *testing.T, addr string, writer int64, table string, l *ledger) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cn := adbcConn(t, addr, mem)
	for seq := int64(0); ctx.Err() == nil; seq++ {
		k := batchKey{writer, seq}
		rec := loadBatch(mem, writer, seq)
		l.attempt(k)
		n, err := adbcIngest(ctx, cn, "dur", table, adbc.OptionValueIngestModeCreateAppend, rec)
		rec.Release()
		if err != nil {
			return
		}
		if n != rowsPerBatch {
			t.Errorf("writer %d seq %d: ExecuteUpdate returned %d rows, want %d", writer, seq, n, rowsPerBatch)
		}
		l.ack(k)
	}
}

// streamWriter sends batches on one plain Flight DoPut stream and takes the
// i-th PutResult as the acknowledgement of the i-th batch.
func streamWriter(ctx context.Context, t *testing.T, addr string, writer int64, table string, l *ledger) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	c, err := flight.NewClientWithMiddleware(addr, nil, nil, grpcOpts()...)
	if err != nil {
		t.Errorf("writer %d: %v", writer, err)
		return
	}
	defer c.Close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.DoPut(sctx)
	if err != nil {
		return
	}
	sem := make(chan struct{}, maxInFlight)
	acks := make(chan struct{})
	go func() {
		defer close(acks)
		var total int64
		for seq := int64(0); ; seq++ {
			res, err := stream.Recv()
			if err != nil {
				return
			}
			var md apronpb.PutResultMetadata
			if err := proto.Unmarshal(res.GetAppMetadata(), &md); err != nil {
				t.Errorf("writer %d: bad PutResult metadata: %v", writer, err)
				return
			}
			total += rowsPerBatch
			if md.RowsWritten != rowsPerBatch || md.TotalRowsWritten != total {
				t.Errorf("writer %d: PutResult %d is %v, want rows %d total %d", writer, seq, &md, rowsPerBatch, total)
			}
			l.ack(batchKey{writer, seq})
			<-sem
		}
	}()
	w := flight.NewRecordWriter(stream, ipc.WithSchema(loadSchema), ipc.WithAllocator(mem))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"dur", table}})
	for seq := int64(0); ctx.Err() == nil; seq++ {
		select {
		case sem <- struct{}{}:
		case <-acks:
			seq = -1
		case <-ctx.Done():
		}
		if seq < 0 || ctx.Err() != nil {
			break
		}
		rec := loadBatch(mem, writer, seq)
		l.attempt(batchKey{writer, seq})
		err := w.Write(rec)
		rec.Release()
		if err != nil {
			break
		}
	}
	_ = w.Close()
	_ = stream.CloseSend()
	cancel()
	<-acks
}

// runLoad runs 4 writers (2 ADBC, 2 streaming DoPut) over tables a and b
// until stop is called, and returns once all of them have returned.
func runLoad(t *testing.T, addr string, round int, l *ledger) (stop func()) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	var wg sync.WaitGroup
	for w := 0; w < writersPerRound; w++ {
		writer := int64(round*writersPerRound + w)
		table := []string{"a", "b"}[w%2]
		l.mu.Lock()
		l.table[writer] = table
		l.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if w < 2 {
				adbcWriter(ctx, t, addr, writer, table, l)
			} else {
				streamWriter(ctx, t, addr, writer, table, l)
			}
		}()
	}
	return func() {
		// The writers fail by themselves once the server is gone; give
		// them a little while, then cancel.
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Errorf("writers still running 20s after the server went away")
		}
		cancel()
		wg.Wait()
	}
}

// verifyLedger reads tables a and b: every acknowledged batch is there
// exactly once, every other attempted batch at most once and whole, and
// nothing else.
func verifyLedger(t *testing.T, addr string, l *ledger) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	rows := map[batchKey]map[int64]int{}
	tables := map[batchKey]string{}
	for _, table := range []string{"a", "b"} {
		d, err := tryReadTable(t, addr, "dur", table)
		if err != nil {
			if len(l.acked) == 0 {
				continue
			}
			t.Fatalf("reading dur.%s: %v", table, err)
		}
		for _, r := range d.Rows {
			k := batchKey{r["writer"].(int64), r["seq"].(int64)}
			if rows[k] == nil {
				rows[k] = map[int64]int{}
			}
			rows[k][r["row"].(int64)]++
			tables[k] = table
			if want := baseTime + k.writer*int64(time.Hour) + k.seq*1000 + r["row"].(int64); r["time"] != want {
				t.Errorf("row %v: time %v, want %d", r, r["time"], want)
			}
		}
	}
	lost, dup, partial, ghost, unackedPresent := 0, 0, 0, 0, 0
	for k := range l.acked {
		if rows[k] == nil {
			lost++
			if lost <= 10 {
				t.Errorf("acknowledged batch writer %d seq %d is missing", k.writer, k.seq)
			}
		}
	}
	for k, rs := range rows {
		if !l.attempted[k] {
			ghost++
			t.Errorf("batch writer %d seq %d was never written but is there", k.writer, k.seq)
			continue
		}
		if !l.acked[k] {
			unackedPresent++
		}
		if tables[k] != l.table[k.writer] {
			t.Errorf("batch writer %d seq %d is in table %s, want %s", k.writer, k.seq, tables[k], l.table[k.writer])
		}
		if len(rs) != rowsPerBatch {
			partial++
			t.Errorf("batch writer %d seq %d has %d of its %d rows", k.writer, k.seq, len(rs), rowsPerBatch)
		}
		for r, n := range rs {
			if n != 1 {
				dup++
				if dup <= 10 {
					t.Errorf("batch writer %d seq %d row %d is there %d times", k.writer, k.seq, r, n)
				}
			}
		}
	}
	t.Logf("verified: %d batches attempted, %d acknowledged, %d present (%d unacknowledged ones present); lost %d, duplicated rows %d, partial %d, unknown %d",
		len(l.attempted), len(l.acked), len(rows), unackedPresent, lost, dup, partial, ghost)
}

// testSeed is APRON_TEST_SEED if set, else the clock.
func testSeed(t *testing.T) uint64 {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("APRON_TEST_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("APRON_TEST_SEED: %v", err)
		}
		seed = v
	}
	t.Logf("random seed %d (rerun with APRON_TEST_SEED=%d)", seed, seed)
	return seed
}

// TestKillDuringConcurrentIngest SIGKILLs the server at random moments of a
// concurrent load, restarting on the same data dir each time; every
// acknowledged batch must survive, exactly once. It ends with a SIGTERM
// under load and a last check.
//
// It runs twice: with the default hour-long segments (everything is
// replayed from the WAL), and with segments that roll over every second or
// 16 MiB (half of a 32 MiB buffer) and persist to the local object store
// all through the load, so that the kills land in every step of
// persistence; that run checks that segments were persisted.
func TestKillDuringConcurrentIngest(t *testing.T) {
	t.Run("wal-only", func(t *testing.T) { killDuringConcurrentIngest(t, false) })
	t.Run("persisting", func(t *testing.T) {
		killDuringConcurrentIngest(t, true, "--segment-duration", "1s", "--buffer-mem-limit", "32MiB")
	})
}

func killDuringConcurrentIngest(t *testing.T, persisting bool, extra ...string) {
	rng := rand.New(rand.NewPCG(testSeed(t), 0))
	dir := t.TempDir()
	// In-flight streaming DoPuts would hold a graceful stop for the whole
	// default shutdown timeout.
	flags := append([]string{"--shutdown-timeout", "2s"}, extra...)
	srv := startServer(t, dir, flags...)
	l := newLedger()
	const kills = 4
	for round := 0; round <= kills; round++ {
		delay := time.Duration(150+rng.IntN(651)) * time.Millisecond
		graceful := round == kills
		t.Logf("round %d: %s after %s of load", round, map[bool]string{true: "SIGTERM", false: "SIGKILL"}[graceful], delay)
		stop := runLoad(t, srv.Addr, round, l)
		time.Sleep(delay)
		if graceful {
			srv.Stop(t) // requires exit code 0
		} else {
			srv.Kill(t)
		}
		stop()
		srv = startServer(t, dir, flags...)
		verifyLedger(t, srv.Addr, l)
		if t.Failed() {
			return
		}
	}
	// And once more after a quiet graceful restart.
	srv = srv.Restart(t)
	verifyLedger(t, srv.Addr, l)
	srv.Stop(t)
	if persisting {
		segs, err := os.ReadDir(filepath.Join(dir, "objects", "segments"))
		if err != nil || len(segs) == 0 {
			t.Fatalf("no segment file in the object store (%v): the run persisted nothing", err)
		}
		t.Logf("%d segment files persisted", len(segs))
	}
}

// TestGracefulStop writes, stops with SIGTERM (exit code 0) and finds the
// data after a restart; SIGINT works the same.
func TestGracefulStop(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	srv := startServer(t, dir)
	cn := adbcConn(t, srv.Addr, mem)
	for i := int64(0); i < 3; i++ {
		rec := idRecord(mem, i*1000, 1000)
		_, err := adbcIngest(testCtx(t), cn, "g", "t", adbc.OptionValueIngestModeCreateAppend, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	srv.Stop(t)
	if s := srv.Stderr(); !containsAll(s, "apron stopped") {
		t.Errorf("no 'apron stopped' log line after SIGTERM:\n%s", s)
	}
	srv = startServer(t, dir)
	wantIDRange(t, readTable(t, srv.Addr, "g", "t"), 0, 3000)

	// SIGINT.
	if err := srv.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-srv.done:
	case <-time.After(stopTimeout):
		t.Fatal("no exit after SIGINT")
	}
	if code := srv.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code %d after SIGINT, want 0", code)
	}
	srv = startServer(t, dir)
	wantIDRange(t, readTable(t, srv.Addr, "g", "t"), 0, 3000)
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !stringsContainsFold(s, p) {
			return false
		}
	}
	return true
}
