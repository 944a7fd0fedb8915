package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	cmd := exec.CommandContext(testCtx(t), py, script, srv.Addr)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("python ADBC client: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
}
