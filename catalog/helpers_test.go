package catalog

import (
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

var (
	tsNs = &arrow.TimestampType{Unit: arrow.Nanosecond}
	i64  = arrow.PrimitiveTypes.Int64
	f64  = arrow.PrimitiveTypes.Float64
	str  = arrow.BinaryTypes.String
)

func fld(name string, dt arrow.DataType) arrow.Field {
	return arrow.Field{Name: name, Type: dt, Nullable: true}
}

// sch builds a schema from fields, as given.
func sch(fields ...arrow.Field) *arrow.Schema { return arrow.NewSchema(fields, nil) }

// cpu is the usual test batch: time, host, usage.
func cpu() *arrow.Schema {
	return sch(fld("time", tsNs), fld("host", str), fld("usage", f64))
}

// write plans and applies a write, failing the test on error.
func write(t testing.TB, c *Catalog, db, table string, s *arrow.Schema) {
	t.Helper()
	ch, err := c.PlanWrite(db, table, s, WriteOptions{Replay: true})
	if err != nil {
		t.Fatalf("PlanWrite(%s.%s): %v", db, table, err)
	}
	if err := c.Apply(ch); err != nil {
		t.Fatalf("Apply(%s.%s): %v", db, table, err)
	}
}

// checkErr asserts that err wraps want (nil: no error) and contains every
// fragment.
func checkErr(t testing.TB, err, want error, fragments ...string) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Fatalf("error %v does not wrap %v", err, want)
	}
	for _, s := range sentinels {
		if s != want && errors.Is(err, s) {
			t.Fatalf("error %v wraps %v as well as %v", err, s, want)
		}
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error %q does not contain %q", err, f)
		}
	}
}

var sentinels = []error{
	ErrInvalidName, ErrInvalidSchema, ErrUnsupportedType, ErrTypeMismatch,
	ErrTableNotFound, ErrDatabaseNotFound, ErrTableExists, ErrLimitExceeded, ErrCorrupt, ErrReplaceInProgress,
}

// colSummary renders columns as "name:type" for compact comparisons.
func colSummary(cols []Column) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = c.Name + ":" + typeName(c.Type)
	}
	return strings.Join(parts, ",")
}
