package flightsvc

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/apron-db/apron/buffer"
)

// gatedReader yields its batches, then, if gate is set, waits for it to
// be closed (or ctx to end, which fails the stream) before it ends: a
// client in the middle of its stream.
type gatedReader struct {
	ctx    context.Context
	schema *arrow.Schema
	recs   []arrow.RecordBatch
	gate   chan struct{}
	sent   chan struct{} // closed once every batch is taken
	i      int
	cur    arrow.RecordBatch
	err    error
	once   sync.Once
}

func (r *gatedReader) Retain()                        {}
func (r *gatedReader) Release()                       {}
func (r *gatedReader) Schema() *arrow.Schema          { return r.schema }
func (r *gatedReader) Record() arrow.RecordBatch      { return r.cur }
func (r *gatedReader) RecordBatch() arrow.RecordBatch { return r.cur }
func (r *gatedReader) Err() error                     { return r.err }

func (r *gatedReader) Next() bool {
	if r.i < len(r.recs) {
		r.cur = r.recs[r.i]
		r.i++
		return true
	}
	r.once.Do(func() { close(r.sent) })
	if r.gate != nil {
		select {
		case <-r.gate:
		case <-r.ctx.Done():
			r.err = r.ctx.Err()
		}
	}
	return false
}

// replaceIngest runs an ExecuteIngest of db.t with if_exists REPLACE.
func replaceIngest(ctx context.Context, c *flightsql.Client, ifNotExist flightsql.TableDefinitionOptionsTableNotExistOption, rdr array.RecordReader) (int64, error) {
	db := "db"
	return c.ExecuteIngest(ctx, rdr, &flightsql.ExecuteIngestOpts{
		TableDefinitionOptions: &flightsql.TableDefinitionOptions{IfNotExist: ifNotExist, IfExists: flightsql.TableDefinitionOptionsTableExistsOptionReplace},
		Table:                  "t", Schema: &db,
	})
}

var replacedSchema = arrow.NewSchema([]arrow.Field{
	{Name: "time", Type: &arrow.TimestampType{Unit: arrow.Nanosecond}},
	{Name: "v", Type: arrow.BinaryTypes.String}, // int64 in ackSchema
	{Name: "w", Type: arrow.PrimitiveTypes.Float64},
}, nil)

func replacedBatch(mem memory.Allocator, n int, nullTimeAt int) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, withNullableTime(replacedSchema))
	defer b.Release()
	for i := range n {
		if i == nullTimeAt {
			b.Field(0).AppendNull()
		} else {
			b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(time.Now().UnixNano()))
		}
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprint(i))
		b.Field(2).(*array.Float64Builder).Append(float64(i))
	}
	return b.NewRecordBatch()
}

func withNullableTime(s *arrow.Schema) *arrow.Schema {
	fields := s.Fields()
	fields[0].Nullable = true
	return arrow.NewSchema(fields, nil)
}

// tableState is db.t as a View shows it: its columns and row count.
func tableState(wb *buffer.WriteBuffer) string {
	v := wb.View()
	defer v.Release()
	tbl, ok := v.Catalog().Table("db", "t")
	if !ok {
		return "no table"
	}
	var n int64
	for _, s := range v.Buffered {
		for _, c := range v.Chunks(s, "db", "t") {
			n += c.Rec.NumRows()
			c.Rec.Release()
		}
	}
	var cols []string
	for _, c := range tbl.Columns {
		cols = append(cols, c.Name+":"+c.Type.String())
	}
	return fmt.Sprintf("%s rows=%d", strings.Join(cols, ","), n)
}

// TestIngestReplace: Flight SQL ingest with if_exists REPLACE makes the
// stream the table's content, with its columns, or, when the stream
// fails or its client goes away, leaves the table as it was; a write to
// the table while a replace runs is refused with ABORTED.
func TestIngestReplace(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	addr, wb := startInProcessBuffer(t, nil)
	c, err := flightsql.NewClient(addr, nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	create := flightsql.TableDefinitionOptionsTableNotExistOptionCreate

	// A missing table: if_not_exist fail refuses, create makes it.
	rec := replacedBatch(mem, 5, -1)
	defer rec.Release()
	rdr, _ := array.NewRecordReader(rec.Schema(), []arrow.RecordBatch{rec})
	_, err = replaceIngest(ctx, c, flightsql.TableDefinitionOptionsTableNotExistOptionFail, rdr)
	rdr.Release()
	if status.Code(err) != codes.NotFound {
		t.Fatalf("replace of a missing table, if_not_exist fail: %v, want NOT_FOUND", err)
	}
	old := ackBatch(7)
	defer old.Release()
	rdr, _ = array.NewRecordReader(old.Schema(), []arrow.RecordBatch{old})
	if n, err := replaceIngest(ctx, c, create, rdr); err != nil || n != 7 {
		t.Fatalf("replace creating the table: %d, %v", n, err)
	}
	rdr.Release()
	const oldState = "time:timestamp[ns],v:int64 rows=7"
	if got := tableState(wb); got != oldState {
		t.Fatalf("after the first replace: %s", got)
	}

	t.Run("fails mid-stream", func(t *testing.T) {
		recs := []arrow.RecordBatch{replacedBatch(mem, 10, -1), replacedBatch(mem, 10, -1), replacedBatch(mem, 10, 4)}
		defer func() {
			for _, r := range recs {
				r.Release()
			}
		}()
		rdr, _ := array.NewRecordReader(recs[0].Schema(), recs)
		defer rdr.Release()
		n, err := replaceIngest(ctx, c, create, rdr)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "aborted") || !strings.Contains(err.Error(), "as it was") || n != 0 {
			t.Fatalf("a replace whose third batch has a null time: %d, %v", n, err)
		}
		if got := tableState(wb); got != oldState {
			t.Fatalf("after a failed replace: %s, want %s", got, oldState)
		}
	})

	t.Run("client goes away", func(t *testing.T) {
		cctx, ccancel := context.WithCancel(ctx)
		rec := replacedBatch(mem, 10, -1)
		defer rec.Release()
		r := &gatedReader{ctx: cctx, schema: rec.Schema(), recs: []arrow.RecordBatch{rec}, gate: make(chan struct{}), sent: make(chan struct{})}
		before := bufferedRows(wb) // hidden ones too
		done := make(chan error, 1)
		go func() {
			_, err := replaceIngest(cctx, c, create, r)
			done <- err
		}()
		<-r.sent
		waitUntil(t, "the replace's batch written", func() bool {
			return len(wb.Catalog().Snapshot().Replaces()) == 1 && bufferedRows(wb) == before+10
		})

		// Meanwhile other writes to the table are refused.
		more := ackBatch(3)
		defer more.Release()
		rdr, _ := array.NewRecordReader(more.Schema(), []arrow.RecordBatch{more})
		defer rdr.Release()
		db := "db"
		_, err := c.ExecuteIngest(ctx, rdr, &flightsql.ExecuteIngestOpts{
			TableDefinitionOptions: &flightsql.TableDefinitionOptions{IfNotExist: create, IfExists: flightsql.TableDefinitionOptionsTableExistsOptionAppend},
			Table:                  "t", Schema: &db})
		if status.Code(err) != codes.Aborted || !strings.Contains(err.Error(), "being replaced") {
			t.Fatalf("an append during a replace: %v, want ABORTED", err)
		}
		if got := tableState(wb); got != oldState {
			t.Fatalf("during the replace: %s, want %s", got, oldState)
		}
		ccancel()
		if err := <-done; err == nil {
			t.Fatal("the cancelled ingest succeeded")
		}
		waitUntil(t, "the replace to be aborted", func() bool { return len(wb.Catalog().Snapshot().Replaces()) == 0 })
		if got := tableState(wb); got != oldState {
			t.Fatalf("after the client went away: %s, want %s", got, oldState)
		}
	})

	t.Run("commits", func(t *testing.T) {
		recs := []arrow.RecordBatch{replacedBatch(mem, 10, -1), replacedBatch(mem, 20, -1)}
		defer func() {
			for _, r := range recs {
				r.Release()
			}
		}()
		rdr, _ := array.NewRecordReader(recs[0].Schema(), recs)
		defer rdr.Release()
		if n, err := replaceIngest(ctx, c, create, rdr); err != nil || n != 30 {
			t.Fatalf("replace: %d, %v", n, err)
		}
		if got, want := tableState(wb), "time:timestamp[ns],v:utf8,w:float64 rows=30"; got != want {
			t.Fatalf("after the replace: %s, want %s", got, want)
		}
	})
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// bufferedRows counts every row in the buffer's segments, hidden or not.
func bufferedRows(wb *buffer.WriteBuffer) int64 {
	var rows int64
	for _, s := range wb.Segments() {
		rows += s.Info().Rows
	}
	return rows
}
