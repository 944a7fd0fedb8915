package integration

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
)

// TestUnknownAction: an unknown action type is refused naming it and the
// actions the server has (arrow-go's adapter said only "the defined
// request is invalid").
func TestUnknownAction(t *testing.T) {
	s := startServer(t, t.TempDir())
	stream, err := flightClient(t, s.Addr).DoAction(testCtx(t), &flight.Action{Type: "apron.nope"})
	if err == nil {
		_, err = stream.Recv()
	}
	wantCode(t, err, codes.InvalidArgument, `"apron.nope"`, "CreatePreparedStatement", "apron.token.create")
}

// TestEmptyCatalogFilter: in Flight SQL a catalog filter of "" means
// "objects without a catalog", of which Apron has none; no filter lists
// Apron's.
func TestEmptyCatalogFilter(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	s := startServer(t, t.TempDir())
	sc := sqlClient(t, s.Addr, mem)
	ctx := testCtx(t)
	rec := idRecord(mem, 0, 1)
	defer rec.Release()
	if _, err := sqlIngest(ctx, sc, "a", "t", rec); err != nil {
		t.Fatal(err)
	}
	empty := ""
	for name, opts := range map[string]*flightsql.GetDBSchemasOpts{"none": {}, "empty": {Catalog: &empty}} {
		info, err := sc.GetDBSchemas(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		n, err := readInfo(ctx, sc, info)
		want := int64(1)
		if name == "empty" {
			want = 0
		}
		if err != nil || n != want {
			t.Errorf("GetDbSchemas, catalog filter %s: %d rows (%v), want %d", name, n, err, want)
		}
	}
	info, err := sc.GetTables(ctx, &flightsql.GetTablesOpts{Catalog: &empty})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := readInfo(ctx, sc, info); err != nil || n != 0 {
		t.Errorf("GetTables, catalog \"\": %d rows (%v), want 0", n, err)
	}
}
