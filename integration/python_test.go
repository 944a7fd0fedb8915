package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestPythonADBC runs testdata/adbc_python.py, Python's ADBC Flight SQL
// driver against the real server: ingest, queries (Python prepares every
// statement), a parameter, an INSERT, GetObjects and GetTableSchema.
// APRON_TEST_PYTHON names a Python with adbc_driver_flightsql and pyarrow
// installed; test.sh makes one. Without it the test is skipped, saying so.
func TestPythonADBC(t *testing.T) {
	py := os.Getenv("APRON_TEST_PYTHON")
	if py == "" {
		skipClient(t, "APRON_TEST_PYTHON is not set: no Python with adbc_driver_flightsql (test.sh sets one up)")
	}
	srv := startServer(t, t.TempDir())
	script, err := filepath.Abs(filepath.Join("testdata", "adbc_python.py"))
	if err != nil {
		t.Fatal(err)
	}
	runClient(t, "python ADBC client", exec.CommandContext(testCtx(t), py, script, srv.Addr))
}

// TestPythonClients runs testdata/python_clients.py: the Python tools
// Apron's users reach for, as they call them. Python's ADBC driver (every
// ingest mode, parameters of every type with ? and $1, executemany
// INSERT, get_info, get_objects, get_table_schema), pandas (to_sql and
// read_sql, naive and zoned datetimes), polars (write_database and
// read_database, strings and Categoricals) and pyarrow.flight (PATH DoPut,
// DoGet of buffered and persisted endpoints: the server persists
// one-second segments). It runs in a zone other than UTC, where a naive
// time taken for local would show. APRON_TEST_PYTHON names a Python with
// adbc_driver_flightsql, pyarrow, pandas and polars; test.sh makes one.
func TestPythonClients(t *testing.T) {
	py := os.Getenv("APRON_TEST_PYTHON")
	if py == "" {
		skipClient(t, "APRON_TEST_PYTHON is not set: no Python with adbc_driver_flightsql, pandas and polars (test.sh sets one up)")
	}
	srv := startServer(t, t.TempDir(), "--segment-duration", "1s")
	script, err := filepath.Abs(filepath.Join("testdata", "python_clients.py"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(testCtx(t), py, script, srv.Addr)
	cmd.Env = append(os.Environ(), "TZ=America/New_York")
	runClient(t, "python clients", cmd)
}
