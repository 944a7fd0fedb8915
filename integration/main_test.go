// Package integration holds Apron's end-to-end tests: each test starts the
// real apron binary (built once by TestMain) as a separate process and talks
// to it over Arrow Flight, Flight SQL and ADBC.
package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// apronBin is the path of the server binary built by TestMain.
var apronBin string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "apron-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	apronBin = filepath.Join(dir, "apron")
	// APRON_BIN runs a binary built beforehand instead: to compare two
	// builds in interleaved benchmark runs.
	if bin := os.Getenv("APRON_BIN"); bin != "" {
		apronBin = bin
		return m.Run()
	}
	// The server is built without -race even under `go test -race`: the race
	// detector applies to the test process only. The query engine links
	// DuckDB, whose Arrow functions need the duckdb_arrow build tag.
	cmd := exec.Command("go", "build", "-tags", "duckdb_arrow", "-o", apronBin, "./cmd/apron")
	cmd.Dir = root
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "integration: building apron:", err)
		return 1
	}
	return m.Run()
}

// moduleRoot walks up from the working directory to the directory holding
// go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}
