package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The tests of real client libraries (Python's ADBC driver, pandas,
// polars and pyarrow.flight; the Flight SQL JDBC driver; a Node Flight
// SQL client; Grafana's calls through arrow-go) each log the client
// versions they ran. test.sh installs the clients; a test whose client is
// not there is skipped, saying so, except in CI (CI=true), where it fails:
// a client that silently stopped running is a client no longer tested.

// skipClient skips t for want of a client, or fails it when CI=true.
func skipClient(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true, and a client test cannot run: "+format, args...)
	}
	t.Skipf(format, args...)
}

// moduleVersion is the version of Go module path that go.mod requires
// (test binaries carry no dependency versions), or "unknown".
func moduleVersion(path string) string {
	root, err := moduleRoot()
	if err != nil {
		return "unknown"
	}
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 && f[0] == path {
			return f[1]
		}
	}
	return "unknown"
}
