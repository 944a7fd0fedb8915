package flightsvc

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/query"
)

// wideBatch is n rows of one string column of width bytes per row.
func wideBatch(mem memory.Allocator, n, width int) arrow.RecordBatch {
	sc := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewRecordBuilder(mem, sc)
	defer b.Release()
	v := strings.Repeat("x", width)
	for range n {
		b.Field(0).(*array.StringBuilder).Append(v)
	}
	return b.NewRecordBatch()
}

// TestStreamChunks: batches bigger than maxChunkBytes are cut, small ones
// are gathered into one, those of sendAloneRows rows go as they are, every row arrives once, and nothing leaks, also
// when the consumer goes away.
func TestStreamChunks(t *testing.T) {
	for _, tc := range []struct {
		name      string
		rows      int
		width     int
		cancelAt  int // stop reading after this many chunks (0: read all)
		wantParts int // of the two batches together
	}{
		{"small", 100, 10, 0, 1},
		{"wide", 2048, 4096, 0, 10},
		{"cancelled", 2048, 4096, 2, 0},
		{"many_small", sendAloneRows / 2, 8, 0, 1},
		{"chunk_sized", sendAloneRows, 8, 0, 2}, // sent as they are, not joined
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			defer mem.AssertSize(t, 0)
			s := &SQLServer{log: slog.New(slog.DiscardHandler), mem: mem}
			rec := wideBatch(mem, tc.rows, tc.width)
			rdr, err := array.NewRecordReader(rec.Schema(), []arrow.RecordBatch{rec, rec})
			rec.Release()
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan struct{})
			ch := s.stream(ctx, rdr, func() { close(done) })
			var rows int64
			parts := 0
			for c := range ch {
				if c.Err != nil {
					t.Fatal(c.Err)
				}
				// A slice shares its parent's buffers: count the bytes its
				// rows use.
				if size := c.Data.NumRows() * int64(tc.width+4); c.Data.NumRows() > 1 && size > maxChunkBytes {
					t.Errorf("chunk of %d rows, %d bytes", c.Data.NumRows(), size)
				}
				rows += c.Data.NumRows()
				parts++
				c.Data.Release()
				if tc.cancelAt > 0 && parts == tc.cancelAt {
					cancel()
					break
				}
			}
			for c := range ch { // drain what was in flight
				if c.Data != nil {
					c.Data.Release()
				}
			}
			<-done
			if tc.cancelAt > 0 {
				return
			}
			if rows != int64(2*tc.rows) {
				t.Errorf("streamed %d rows, want %d", rows, 2*tc.rows)
			}
			if want := tc.wantParts; parts != want {
				t.Errorf("streamed %d chunks, want %d", parts, want)
			}
		})
	}
}

// TestPreparedStorePerClient: a client that fills its share is refused,
// and only it; past the server's bound, the idle handles of the client
// holding the most go first.
func TestPreparedStorePerClient(t *testing.T) {
	now := time.Unix(1e9, 0)
	p := newPreparedStore()
	p.now = func() time.Time { return now }
	p.perClient, p.max = 3, 5
	st := &query.Statement{SQL: "SELECT 1"}
	var flood []string
	for i := range 3 {
		h, err := p.add("flooder", "h1", "", st)
		if err != nil {
			t.Fatalf("add %d: %v", i, err)
		}
		flood = append(flood, h)
		now = now.Add(time.Second) // flood[0] is the least recently used
	}
	_, err := p.add("flooder", "h1", "", st)
	if got := fmt.Sprint(statusOf(err)); !strings.Contains(got, "ResourceExhausted") || !strings.Contains(got, "others are not affected") {
		t.Errorf("add past the client's bound: %v", got)
	}
	// Another client still prepares.
	if _, err := p.add("other", "h2", "", st); err != nil {
		t.Fatalf("another client: %v", err)
	}
	if _, err := p.add("other", "h2", "", st); err != nil {
		t.Fatalf("another client: %v", err)
	}
	// The server is full (5): nothing idle long enough yet.
	if _, err := p.add("third", "h3", "", st); err == nil {
		t.Fatal("add past the server's bound with nothing idle: accepted")
	}
	now = now.Add(2 * preparedEvictIdle)
	h, err := p.add("third", "h3", "", st)
	if err != nil {
		t.Fatalf("add past the server's bound with idle handles: %v", err)
	}
	// The flooder's oldest handle went.
	if _, _, err := p.get([]byte(flood[0]), ""); err == nil {
		t.Error("the flooder's least recently used handle is still open")
	}
	if _, _, err := p.get([]byte(h), ""); err != nil {
		t.Error(err)
	}
	// One host's clients together: at most perHost.
	p.perHost, p.max = 3, 100
	if _, err := p.add("another-conn-of-h2", "h2", "", st); err != nil {
		t.Fatalf("h2's third handle: %v", err)
	}
	_, err = p.add("yet-another-conn-of-h2", "h2", "", st)
	if got := fmt.Sprint(statusOf(err)); !strings.Contains(got, "ResourceExhausted") || !strings.Contains(got, "this host") {
		t.Errorf("add past the host's bound: %v", got)
	}
	p.closeAll()
	if len(p.mu.m) != 0 || len(p.mu.clients) != 0 || len(p.mu.hosts) != 0 || p.mu.bytes != 0 {
		t.Errorf("after closeAll: %d handles, %d clients, %d hosts, %d bytes", len(p.mu.m), len(p.mu.clients), len(p.mu.hosts), p.mu.bytes)
	}
}
