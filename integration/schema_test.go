package integration

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
)

// TestSchemaEvolution adds and omits columns across writes.
func TestSchemaEvolution(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	srv := startServer(t, t.TempDir())
	c := sqlClient(t, srv.Addr, mem)
	ctx := testCtx(t)

	s1 := arrow.NewSchema([]arrow.Field{{Name: "time", Type: tsNs}, {Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "a", Type: arrow.PrimitiveTypes.Int64}}, nil)
	s2 := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "b", Type: arrow.BinaryTypes.String}, {Name: "time", Type: tsNs}}, nil)
	s3 := arrow.NewSchema([]arrow.Field{{Name: "time", Type: tsNs}, {Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "c", Type: arrow.FixedWidthTypes.Boolean}, {Name: "a", Type: arrow.PrimitiveTypes.Int64}}, nil)
	r1 := jsonRecord(t, mem, s1, `[{"time":1000,"id":1,"a":10},{"time":2000,"id":2,"a":20}]`)
	r2 := jsonRecord(t, mem, s2, `[{"time":3000,"id":3,"b":"x"}]`)
	r3 := jsonRecord(t, mem, s3, `[{"time":4000,"id":4,"c":true,"a":40}]`)
	defer release(r1, r2, r3)
	for i, r := range []arrow.RecordBatch{r1, r2, r3} {
		if _, err := sqlIngest(ctx, c, "evo", "t", r); err != nil {
			t.Fatalf("write %d: %v", i+1, err)
		}
		if i == 0 {
			// The next writes go to a later segment (one per start), whose
			// reads and replay must agree with the first one's.
			srv = srv.Restart(t)
			c = sqlClient(t, srv.Addr, mem)
		}
	}
	want := map[int64]map[string]any{
		1: {"time": int64(1000), "id": int64(1), "a": int64(10), "b": nil, "c": nil},
		2: {"time": int64(2000), "id": int64(2), "a": int64(20), "b": nil, "c": nil},
		3: {"time": int64(3000), "id": int64(3), "a": nil, "b": "x", "c": nil},
		4: {"time": int64(4000), "id": int64(4), "a": int64(40), "b": nil, "c": true},
	}
	check := func(when string) {
		d := readTable(t, srv.Addr, "evo", "t")
		if got, w := schemaString(d.Schema), "(time:timestamp[ns], id:int64, a:int64, b:utf8, c:bool)"; got != w {
			t.Errorf("%s: schema %s, want %s", when, got, w)
		}
		if d.NumRows() != 4 {
			t.Fatalf("%s: %d rows, want 4: %v", when, d.NumRows(), d.Rows)
		}
		for _, r := range d.Rows {
			w := want[r["id"].(int64)]
			for k, v := range w {
				if r[k] != v {
					t.Errorf("%s: row %v: column %s = %v, want %v", when, r, k, r[k], v)
				}
			}
		}
	}
	check("before restart")
	srv = srv.Restart(t)
	check("after restart")
}

// TestSchemaStringTypes checks that utf8, large_utf8 and dictionary<utf8>
// count as the same type, stored and read as utf8.
func TestSchemaStringTypes(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	srv := startServer(t, t.TempDir())
	c := sqlClient(t, srv.Addr, mem)
	ctx := testCtx(t)

	large := arrow.NewSchema([]arrow.Field{{Name: "time", Type: tsNs}, {Name: "s", Type: arrow.BinaryTypes.LargeString}}, nil)
	utf8 := arrow.NewSchema([]arrow.Field{{Name: "time", Type: tsNs}, {Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	r1 := jsonRecord(t, mem, large, `[{"time":1,"s":"large"}]`)
	r2 := jsonRecord(t, mem, utf8, `[{"time":2,"s":"plain"}]`)
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	dict := arrow.NewSchema([]arrow.Field{{Name: "time", Type: tsNs}, {Name: "s", Type: dt}}, nil)
	rb := array.NewRecordBuilder(mem, dict)
	for i, v := range []string{"dict-a", "dict-b", "dict-a"} {
		rb.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(3 + i))
		if err := rb.Field(1).(*array.BinaryDictionaryBuilder).AppendString(v); err != nil {
			t.Fatal(err)
		}
	}
	r3 := rb.NewRecordBatch()
	rb.Release()
	defer release(r1, r2, r3)
	for i, r := range []arrow.RecordBatch{r1, r2, r3} {
		if _, err := sqlIngest(ctx, c, "strs", "t", r); err != nil {
			t.Fatalf("write %d (%s): %v", i+1, r.Schema(), err)
		}
	}
	want := map[int64]string{1: "large", 2: "plain", 3: "dict-a", 4: "dict-b", 5: "dict-a"}
	for _, when := range []string{"before restart", "after restart"} {
		if when == "after restart" {
			srv = srv.Restart(t)
		}
		d := readTable(t, srv.Addr, "strs", "t")
		if got := schemaString(d.Schema); got != "(time:timestamp[ns], s:utf8)" {
			t.Errorf("%s: schema %s, want s as utf8", when, got)
		}
		if d.NumRows() != 5 {
			t.Fatalf("%s: got %d rows, want 5", when, d.NumRows())
		}
		for _, r := range d.Rows {
			if r["s"] != want[r["time"].(int64)] {
				t.Errorf("%s: row %v, want s=%q", when, r, want[r["time"].(int64)])
			}
		}
	}
}

// badInput is a write the server must reject without changing anything.
type badInput struct {
	name      string
	db, table string
	schema    *arrow.Schema
	json      string                                   // rows; "" for one row of nulls but for time
	code      codes.Code                               // expected gRPC code
	parts     []string                                 // the message must mention these
	build     func(memory.Allocator) arrow.RecordBatch // overrides schema/json
}

func (b badInput) record(t testing.TB, mem memory.Allocator) arrow.RecordBatch {
	if b.build != nil {
		return b.build(mem)
	}
	if b.json != "" {
		return jsonRecord(t, mem, b.schema, b.json)
	}
	cols := make([]arrow.Array, b.schema.NumFields())
	for i, f := range b.schema.Fields() {
		if f.Name == "time" {
			tb := array.NewTimestampBuilder(mem, f.Type.(*arrow.TimestampType))
			tb.Append(arrow.Timestamp(baseTime))
			cols[i] = tb.NewArray()
			tb.Release()
			continue
		}
		cols[i] = array.MakeArrayOfNull(mem, f.Type, 1)
	}
	rec := array.NewRecordBatch(b.schema, cols, 1)
	release2(cols)
	return rec
}

func release2(arrs []arrow.Array) {
	for _, a := range arrs {
		a.Release()
	}
}

// checkRejected sends every bad input with Flight SQL ingest (create_append)
// and requires, after each, the error it names and an unchanged catalog and
// data; then restarts the server and checks again. It returns the new
// server.
func checkRejected(t *testing.T, srv *server, cases []badInput) *server {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	c := sqlClient(t, srv.Addr, mem)
	fc := flightClient(t, srv.Addr)
	before := catalogState(t, srv.Addr)
	for _, bc := range cases {
		t.Run(bc.name, func(t *testing.T) {
			rec := bc.record(t, mem)
			defer rec.Release()
			n, err := sqlIngest(testCtx(t), c, bc.db, bc.table, rec)
			if err == nil {
				t.Errorf("write of %s into %s.%s succeeded (%d rows), want %v", rec.Schema(), bc.db, bc.table, n, bc.code)
			} else {
				wantCode(t, err, bc.code, bc.parts...)
				if t.Failed() {
					t.Logf("error: %v", err)
				}
			}
			if n != 0 {
				t.Errorf("rejected write reported %d rows written", n)
			}
			if after := catalogState(t, srv.Addr); after != before {
				t.Errorf("rejected write changed the catalog or data:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			// The same through plain Flight DoPut.
			res, err := flightPut(testCtx(t), fc, []string{bc.db, bc.table}, mem, rec)
			if err == nil {
				t.Errorf("DoPut of %s into %s.%s succeeded (%v), want %v", rec.Schema(), bc.db, bc.table, res, bc.code)
			} else {
				wantCode(t, err, bc.code, bc.parts...)
			}
			if len(res) != 0 {
				t.Errorf("rejected DoPut got PutResults %v", res)
			}
			if after := catalogState(t, srv.Addr); after != before {
				t.Errorf("rejected DoPut changed the catalog or data:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
	srv = srv.Restart(t)
	if after := catalogState(t, srv.Addr); after != before {
		t.Errorf("after restart (WAL replay) the catalog or data changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	return srv
}

// seed writes two tables so that rejected writes have something to spoil.
func seed(t *testing.T, srv *server) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	c := sqlClient(t, srv.Addr, mem)
	r := idRecord(mem, 0, 10)
	defer r.Release()
	for _, tbl := range []string{"t", "u"} {
		if _, err := sqlIngest(testCtx(t), c, "db", tbl, r); err != nil {
			t.Fatalf("seeding db.%s: %v", tbl, err)
		}
	}
}

func oneCol(name string, dt arrow.DataType) *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{{Name: "time", Type: tsNs}, {Name: name, Type: dt, Nullable: true}}, nil)
}

// TestSchemaTypeMismatch sends columns whose type differs from the stored
// one.
func TestSchemaTypeMismatch(t *testing.T) {
	srv := startServer(t, t.TempDir())
	seed(t, srv)
	checkRejected(t, srv, []badInput{
		{name: "float64 into int64", db: "db", table: "t", schema: oneCol("id", arrow.PrimitiveTypes.Float64),
			code: codes.InvalidArgument, parts: []string{`"db"`, `"t"`, `"id"`, "int64", "float64"}},
		{name: "int64 into utf8", db: "db", table: "t", schema: oneCol("tag", arrow.PrimitiveTypes.Int64),
			code: codes.InvalidArgument, parts: []string{`"db"`, `"t"`, `"tag"`, "utf8", "int64"}},
		{name: "utf8 into float64", db: "db", table: "u", schema: oneCol("value", arrow.BinaryTypes.String),
			code: codes.InvalidArgument, parts: []string{`"db"`, `"u"`, `"value"`, "float64", "utf8"}},
		{name: "int32 into int64", db: "db", table: "u", schema: oneCol("id", arrow.PrimitiveTypes.Int32),
			code: codes.InvalidArgument, parts: []string{`"id"`, "int64", "int32"}},
		{name: "duplicate column", db: "db", table: "t",
			schema: arrow.NewSchema([]arrow.Field{{Name: "time", Type: tsNs}, {Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil),
			code:   codes.InvalidArgument, parts: []string{`"id"`}},
		{name: "duplicate time column", db: "db", table: "t",
			schema: arrow.NewSchema([]arrow.Field{{Name: "time", Type: tsNs}, {Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "time", Type: tsNs}}, nil),
			code:   codes.InvalidArgument, parts: []string{"time"}},
		{name: "time out of the nanosecond range", db: "db", table: "t",
			schema: arrow.NewSchema([]arrow.Field{{Name: "time", Type: &arrow.TimestampType{Unit: arrow.Second}}, {Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil),
			json:   `[{"time":100000000000,"id":1}]`, code: codes.InvalidArgument, parts: []string{"time", "range"}},
		{name: "time as int64", db: "db", table: "t",
			schema: arrow.NewSchema([]arrow.Field{{Name: "time", Type: arrow.PrimitiveTypes.Int64}, {Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil),
			json:   `[{"time":1,"id":1}]`, code: codes.InvalidArgument, parts: []string{"time", "timestamp"}},
		// A new column together with a mismatching one: neither may land.
		{name: "new column with a mismatch", db: "db", table: "t",
			schema: arrow.NewSchema([]arrow.Field{{Name: "time", Type: tsNs}, {Name: "newcol", Type: arrow.PrimitiveTypes.Int64}, {Name: "id", Type: arrow.BinaryTypes.String}}, nil),
			json:   `[{"time":1,"newcol":1,"id":"x"}]`, code: codes.InvalidArgument, parts: []string{`"id"`}},
	})
}

// TestSchemaUnsupportedTypes sends column types the server does not store.
func TestSchemaUnsupportedTypes(t *testing.T) {
	srv := startServer(t, t.TempDir())
	seed(t, srv)
	var cases []badInput
	for _, dt := range []arrow.DataType{
		arrow.ListOf(arrow.PrimitiveTypes.Int64),
		arrow.StructOf(arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int64, Nullable: true}),
		&arrow.Decimal128Type{Precision: 10, Scale: 2},
		arrow.FixedWidthTypes.Float16,
	} {
		word := strings.SplitN(dt.String(), "<", 2)[0]
		word = strings.SplitN(word, "(", 2)[0]
		// In a new table, in a new column of an existing table, and in a new
		// database.
		cases = append(cases,
			badInput{name: dt.String() + " new table", db: "db", table: "newtable", schema: oneCol("x", dt), code: codes.InvalidArgument, parts: []string{word}},
			badInput{name: dt.String() + " new column", db: "db", table: "t", schema: oneCol("x", dt), code: codes.InvalidArgument, parts: []string{word}},
			badInput{name: dt.String() + " new database", db: "newdb", table: "t", schema: oneCol("x", dt), code: codes.InvalidArgument, parts: []string{word}},
		)
	}
	checkRejected(t, srv, cases)
}

// TestSchemaNames sends invalid database, table and column names.
func TestSchemaNames(t *testing.T) {
	srv := startServer(t, t.TempDir())
	seed(t, srv)
	long := strings.Repeat("x", 256)
	i64 := arrow.PrimitiveTypes.Int64
	var cases []badInput
	for _, db := range []string{"has space", "a/b", "a.b", "é", "semi;colon", long} {
		cases = append(cases, badInput{name: "database " + db[:min(len(db), 12)], db: db, table: "t", schema: oneCol("v", i64),
			code: codes.InvalidArgument, parts: []string{"database"}})
	}
	for _, tbl := range []string{"tab\x01le", "new\nline", long} {
		cases = append(cases, badInput{name: "table " + tbl[:min(len(tbl), 12)], db: "db", table: tbl, schema: oneCol("v", i64),
			code: codes.InvalidArgument, parts: []string{"table"}})
	}
	for _, col := range []string{"", "col\x00", "tab\tcol", long} {
		for _, tbl := range []string{"t", "fresh"} {
			cases = append(cases, badInput{name: "column " + col[:min(len(col), 12)] + " in " + tbl, db: "db", table: tbl, schema: oneCol(col, i64),
				code: codes.InvalidArgument, parts: []string{"column"}})
		}
	}
	checkRejected(t, srv, cases)

	// Names at the limit are fine: 255 bytes, unicode in tables and columns.
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	srv2 := startServer(t, t.TempDir())
	c := sqlClient(t, srv2.Addr, mem)
	ok := strings.Repeat("y", 255)
	rec := jsonRecord(t, mem, oneCol("température "+ok[:200], i64), `[{"time":1}]`)
	defer rec.Release()
	for _, target := range [][2]string{{ok, ok}, {"Db_1-x", "mesure été"}} {
		if _, err := sqlIngest(testCtx(t), c, target[0], target[1], rec); err != nil {
			t.Errorf("valid names %q.%q rejected: %v", target[0], target[1], err)
		}
	}
}

// TestSchemaLimits exceeds --max-databases, --max-tables and
// --max-columns-per-table.
func TestSchemaLimits(t *testing.T) {
	srv := startServer(t, t.TempDir(), "--max-databases", "2", "--max-tables", "3", "--max-columns-per-table", "5")
	seed(t, srv) // db.t, db.u with 4 columns each
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	c := sqlClient(t, srv.Addr, mem)
	// One more database and one more table are allowed.
	rec := jsonRecord(t, mem, oneCol("v", arrow.PrimitiveTypes.Int64), `[{"time":1,"v":1}]`)
	if _, err := sqlIngest(testCtx(t), c, "db2", "third", rec); err != nil {
		t.Fatalf("third table in a second database: %v", err)
	}
	rec.Release()
	// One more column in db.t is allowed (5 with time).
	rec = jsonRecord(t, mem, oneCol("fifth", arrow.PrimitiveTypes.Int64), `[{"time":1,"fifth":1}]`)
	if _, err := sqlIngest(testCtx(t), c, "db", "t", rec); err != nil {
		t.Fatalf("fifth column: %v", err)
	}
	rec.Release()
	mem.AssertSize(t, 0)

	wide := func(n int) *arrow.Schema {
		fs := []arrow.Field{{Name: "time", Type: tsNs}}
		for i := 0; i < n; i++ {
			fs = append(fs, arrow.Field{Name: "c" + string(rune('a'+i)), Type: arrow.PrimitiveTypes.Int64, Nullable: true})
		}
		return arrow.NewSchema(fs, nil)
	}
	srv = checkRejected(t, srv, []badInput{
		{name: "third database", db: "db3", table: "t", schema: oneCol("v", arrow.PrimitiveTypes.Int64),
			code: codes.ResourceExhausted, parts: []string{"--max-databases"}},
		{name: "fourth table", db: "db", table: "fourth", schema: oneCol("v", arrow.PrimitiveTypes.Int64),
			code: codes.ResourceExhausted, parts: []string{"--max-tables"}},
		{name: "sixth column", db: "db", table: "t", schema: oneCol("sixth", arrow.PrimitiveTypes.Int64),
			code: codes.ResourceExhausted, parts: []string{"--max-columns-per-table"}},
		{name: "new table too wide", db: "db2", table: "third", schema: wide(5),
			code: codes.ResourceExhausted, parts: []string{"--max-columns-per-table"}},
	})
	// Limits hold after a restart too.
	c = sqlClient(t, srv.Addr, mem)
	rec = jsonRecord(t, mem, oneCol("v", arrow.PrimitiveTypes.Int64), `[{"time":1,"v":1}]`)
	defer rec.Release()
	_, err := sqlIngest(testCtx(t), c, "db", "fourth", rec)
	wantCode(t, err, codes.ResourceExhausted, "--max-tables")
}
