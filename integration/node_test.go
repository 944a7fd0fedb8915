package integration

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestNodeClient runs testdata/node_client.cjs: a Node Flight SQL client
// from npm (@lakehouse-rs/flight-sql-client, results read with
// apache-arrow) with a bearer token and a database header: a query with
// exact nanosecond times and its column metadata, GetCatalogs,
// GetDbSchemas, GetTables (with its schema; catalog "" lists nothing), a
// refused statement and a wrong token. APRON_TEST_NODE_DIR names a
// directory whose node_modules hold both packages; test.sh installs them.
func TestNodeClient(t *testing.T) {
	dir := os.Getenv("APRON_TEST_NODE_DIR")
	if dir == "" {
		skipClient(t, "APRON_TEST_NODE_DIR is not set: no Node Flight SQL client (test.sh installs one with npm)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		skipClient(t, "no node: %v", err)
	}
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the connections close
	srv := startAuthServer(t, t.TempDir())
	cn, err := adbcOpen(t, "grpc://"+srv.Addr, bearerOpts(srv.Admin), mem)
	if err != nil {
		t.Fatal(err)
	}
	rec := idRecord(mem, 0, 21)
	n, err := adbcIngest(testCtx(t), cn, "node", "t", "adbc.ingest.mode.create", rec)
	rec.Release()
	if err != nil || n != 21 {
		t.Fatalf("ingest: %d rows, %v", n, err)
	}
	script, err := filepath.Abs(filepath.Join("testdata", "node_client.cjs"))
	if err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(testCtx(t), node, script, host, port, srv.Admin)
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
	runClient(t, "node client", cmd)
}
