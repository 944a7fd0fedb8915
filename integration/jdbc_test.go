package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestJDBC runs testdata/JdbcClient.java with the Arrow Flight SQL JDBC
// driver against the real server: connect (GetSqlInfo), a query, a
// prepared query with a parameter, getTables and getColumns.
// APRON_TEST_JDBC_JAR names the driver's jar; test.sh fetches it with
// Maven. Without it the test is skipped, saying so.
func TestJDBC(t *testing.T) {
	jar := os.Getenv("APRON_TEST_JDBC_JAR")
	if jar == "" {
		skipClient(t, "APRON_TEST_JDBC_JAR is not set: no Flight SQL JDBC driver (test.sh fetches one)")
	}
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	srv := startServer(t, t.TempDir())
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "time", Type: &arrow.TimestampType{Unit: arrow.Nanosecond}},
		{Name: "host", Type: arrow.BinaryTypes.String},
		{Name: "usage", Type: arrow.PrimitiveTypes.Float64},
	}, nil)
	b := array.NewRecordBuilder(mem, sc)
	base := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC).UnixNano()
	for i := range 1000 {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(base + int64(i)))
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("h%d", i%7))
		b.Field(2).(*array.Float64Builder).Append(float64(i))
	}
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	if n, err := sqlIngest(testCtx(t), sqlClient(t, srv.Addr, mem), "jdbc", "cpu", rec); err != nil || n != 1000 {
		t.Fatalf("ingest: %d rows, %v", n, err)
	}
	src, err := filepath.Abs(filepath.Join("testdata", "JdbcClient.java"))
	if err != nil {
		t.Fatal(err)
	}
	// The driver uses Arrow's off-heap memory: Java 17 needs the module
	// opened to it. Timestamps are bound and read in a UTC JVM and in one
	// that is not.
	for _, tz := range []string{"UTC", "America/New_York"} {
		cmd := exec.CommandContext(testCtx(t), "java", "-Duser.timezone="+tz, "--add-opens=java.base/java.nio=ALL-UNNAMED",
			"-cp", jar, src, srv.Addr)
		runClient(t, "JDBC client in time zone "+tz, cmd)
	}
}
