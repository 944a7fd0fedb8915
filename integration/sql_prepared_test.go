package integration

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-adbc/go/adbc"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
)

// adbcPrepared prepares sql, binds params (if not nil), runs it as a
// query and returns its rows and parameter schema. The statement stays
// open until the result is read: closing it closes the prepared statement
// on the server.
func adbcPrepared(ctx context.Context, t testing.TB, cn adbc.Connection, sql string, params arrow.RecordBatch) ([]map[string]any, *arrow.Schema, error) {
	st, err := cn.NewStatement()
	if err != nil {
		return nil, nil, err
	}
	defer st.Close()
	if err := st.SetSqlQuery(sql); err != nil {
		return nil, nil, err
	}
	if err := st.Prepare(ctx); err != nil {
		return nil, nil, err
	}
	ps, err := st.GetParameterSchema()
	if err != nil {
		return nil, nil, err
	}
	if params != nil {
		if err := st.Bind(ctx, params); err != nil {
			return nil, nil, err
		}
	}
	rdr, _, err := st.ExecuteQuery(ctx)
	if err != nil {
		return nil, ps, err
	}
	return collect(t, rdr), ps, nil
}

func int64Params(t testing.TB, mem memory.Allocator, vals ...int64) arrow.RecordBatch {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{{Name: "1", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewRecordBuilder(mem, sc)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues(vals, nil)
	return b.NewRecordBatch()
}

// TestSQLPrepared runs prepared statements with and without parameters
// through ADBC (Prepare, Bind) and the Flight SQL client.
func TestSQLPrepared(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	srv := startServer(t, t.TempDir())
	seedSQL(t, srv.Addr, 100)
	cn := adbcConn(t, srv.Addr, mem)
	ctx := testCtx(t)

	t.Run("adbc no params", func(t *testing.T) {
		rows, ps, err := adbcPrepared(ctx, t, cn, `SELECT id FROM sqldb.cpu WHERE id < 3 ORDER BY id`, nil)
		if err != nil {
			t.Fatal(err)
		}
		if ps != nil && ps.NumFields() != 0 {
			t.Errorf("parameter schema %s, want none", ps)
		}
		wantValues(t, "ids", column(rows, "id"), int64(0), int64(1), int64(2))
	})

	t.Run("adbc params", func(t *testing.T) {
		p := int64Params(t, mem, 3, 42)
		defer p.Release()
		rows, ps, err := adbcPrepared(ctx, t, cn, `SELECT id, tag FROM sqldb.cpu WHERE id = $1`, p)
		if err != nil {
			t.Fatal(err)
		}
		if ps == nil || ps.NumFields() != 1 {
			t.Errorf("parameter schema %v, want one field", ps)
		}
		wantValues(t, "ids (one execution per parameter row)", column(rows, "id"), int64(3), int64(42))
		wantValues(t, "tags", column(rows, "tag"), "tag3", "tag0")
	})

	t.Run("adbc params missing", func(t *testing.T) {
		_, _, err := adbcPrepared(ctx, t, cn, `SELECT id FROM sqldb.cpu WHERE id = $1`, nil)
		wantADBC(t, err, adbc.StatusInvalidArgument, "parameter")
	})

	t.Run("flightsql client", func(t *testing.T) {
		c := sqlClient(t, srv.Addr, mem)
		ps, err := c.Prepare(ctx, `SELECT id, value FROM sqldb.cpu WHERE id >= ? AND id < ? ORDER BY id`)
		if err != nil {
			t.Fatal(err)
		}
		defer ps.Close(ctx)
		if got := schemaString(ps.DatasetSchema()); got != "(id:int64, value:float64)" {
			t.Errorf("dataset schema %s", got)
		}
		if n := ps.ParameterSchema().NumFields(); n != 2 {
			t.Errorf("parameter schema %s, want 2 fields", ps.ParameterSchema())
		}
		sc := arrow.NewSchema([]arrow.Field{{Name: "lo", Type: arrow.PrimitiveTypes.Int64}, {Name: "hi", Type: arrow.PrimitiveTypes.Int64}}, nil)
		p := jsonRecord(t, mem, sc, `[{"lo": 10, "hi": 12}]`)
		defer p.Release()
		ps.SetParameters(p)
		info, err := ps.Execute(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rdr, err := c.DoGet(ctx, info.Endpoint[0].Ticket)
		if err != nil {
			t.Fatal(err)
		}
		wantValues(t, "ids", column(collect(t, rdr), "id"), int64(10), int64(11))

		// The schema of a prepared statement.
		res, err := ps.GetSchema(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got, err := flight.DeserializeSchema(res.GetSchema(), mem)
		if err != nil {
			t.Fatal(err)
		}
		if schemaString(got) != "(id:int64, value:float64)" {
			t.Errorf("GetSchema of the prepared statement = %s", schemaString(got))
		}
	})

	t.Run("closed handle", func(t *testing.T) {
		c := sqlClient(t, srv.Addr, mem)
		ps, err := c.Prepare(ctx, `SELECT 1 AS one`)
		if err != nil {
			t.Fatal(err)
		}
		info, err := ps.Execute(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := ps.Close(ctx); err != nil {
			t.Fatal(err)
		}
		rdr, err := c.DoGet(ctx, info.Endpoint[0].Ticket)
		if err == nil {
			for rdr.Next() {
			}
			err = rdr.Err()
			rdr.Release()
		}
		wantCode(t, err, codes.NotFound, "prepare it again")
	})
}

// TestSQLInsert runs INSERT … VALUES and INSERT … SELECT, plain and
// prepared, checks the row counts, and the rows in a following query and
// after a restart.
func TestSQLInsert(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	srv := startServer(t, t.TempDir())
	seedSQL(t, srv.Addr, 10)
	cn := adbcConn(t, srv.Addr, mem)
	ctx := testCtx(t)

	n, err := adbcUpdate(ctx, cn, `INSERT INTO sqldb.cpu (time, id, value, tag) VALUES
		('2024-01-03 00:00:00.000000001'::TIMESTAMP_NS, 100, 1.5, 'ins'), ('2024-01-03 00:00:00.000000002'::TIMESTAMP_NS, 101, NULL, 'ins')`)
	if err != nil {
		t.Fatalf("INSERT VALUES: %v", err)
	}
	if n != 2 {
		t.Errorf("INSERT VALUES wrote %d rows, want 2", n)
	}

	c := sqlClient(t, srv.Addr, mem)
	n, err = c.ExecuteUpdate(ctx, `INSERT INTO sqldb.cpu SELECT time + INTERVAL 1 DAY, id + 1000, value, 'copy' FROM sqldb.cpu WHERE id < 5`)
	if err != nil {
		t.Fatalf("INSERT SELECT: %v", err)
	}
	if n != 5 {
		t.Errorf("INSERT SELECT wrote %d rows, want 5", n)
	}

	// Into a table that does not exist.
	_, err = adbcUpdate(ctx, cn, `INSERT INTO sqldb.nosuch VALUES (now(), 1)`)
	wantADBC(t, err, adbc.StatusNotFound, "nosuch")

	const check = `SELECT tag, count(*) AS n FROM sqldb.cpu GROUP BY tag HAVING tag IN ('ins', 'copy') ORDER BY tag`
	want := []any{int64(5), int64(2)}
	wantValues(t, "inserted rows by tag", column(mustQuery(t, cn, check), "n"), want...)
	wantValues(t, "exact inserted time", column(mustQuery(t, cn, `SELECT time FROM sqldb.cpu WHERE id = 101`), "time"),
		int64(1704240000000000002))

	srv = srv.Restart(t)
	cn = adbcConn(t, srv.Addr, mem)
	wantValues(t, "inserted rows by tag after restart", column(mustQuery(t, cn, check), "n"), want...)
	wantValues(t, "all rows after restart", column(mustQuery(t, cn, `SELECT count(*) AS n FROM sqldb.cpu`), "n"), int64(17))

	// A value that does not convert fails the INSERT, writes nothing, and
	// leaves the server able to stop (no query connection held).
	_, err = adbcUpdate(ctx, cn, `INSERT INTO sqldb.cpu (time, id) VALUES (now(), 'x')`)
	wantADBC(t, err, adbc.StatusInvalidArgument, "'x'")
	wantValues(t, "all rows after a failed INSERT", column(mustQuery(t, cn, `SELECT count(*) AS n FROM sqldb.cpu`), "n"), int64(17))
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-srv.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("apron did not exit 10s after SIGTERM: a query connection is still held; stderr:\n%s", srv.Stderr())
	}
}

// TestSQLInsertPrepared runs prepared INSERTs through ADBC (Prepare, Bind,
// ExecuteUpdate), with and without parameters.
func TestSQLInsertPrepared(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	srv := startServer(t, t.TempDir())
	seedSQL(t, srv.Addr, 10)
	cn := adbcConn(t, srv.Addr, mem)
	ctx := testCtx(t)

	exec := func(sql string, params arrow.RecordBatch) (int64, error) {
		st, err := cn.NewStatement()
		if err != nil {
			return 0, err
		}
		defer st.Close()
		if err := st.SetSqlQuery(sql); err != nil {
			return 0, err
		}
		if err := st.Prepare(ctx); err != nil {
			return 0, err
		}
		if params != nil {
			if err := st.Bind(ctx, params); err != nil {
				return 0, err
			}
		}
		return st.ExecuteUpdate(ctx)
	}
	if n, err := exec(`INSERT INTO sqldb.cpu (time, id, tag) VALUES (now(), 100, 'prep')`, nil); err != nil || n != 1 {
		t.Errorf("prepared INSERT without parameters: %d rows, %v; want 1", n, err)
	}
	// One execution per parameter row.
	p := int64Params(t, mem, 200, 201, 202)
	defer p.Release()
	if n, err := exec(`INSERT INTO sqldb.cpu (time, id, tag) VALUES (now(), $1, 'prep')`, p); err != nil || n != 3 {
		t.Errorf("prepared INSERT with parameters: %d rows, %v; want 3", n, err)
	}
	wantValues(t, "prepared rows", column(mustQuery(t, cn, `SELECT id FROM sqldb.cpu WHERE tag = 'prep' ORDER BY id`), "id"),
		int64(100), int64(200), int64(201), int64(202))
}
