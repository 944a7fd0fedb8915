//go:build duckdb_arrow

package query

import (
	"errors"
	"fmt"

	duck "github.com/duckdb/duckdb-go-bindings"
)

// DuckDB's sandbox: what DuckDB itself refuses, whatever
// statement reaches it (the statement check, admit.go, is the first
// line; this is the second). See doc.go, "Sandbox".

// maxExpressionDepth is DuckDB's max_expression_depth for clients' SQL.
// DuckDB's binder costs about the cube of an expression's depth and
// cannot be interrupted (duckdb_interrupt acts on execution only):
// measured on 2 cores, a chain of 100 nested calls binds in 21 ms, 200 in
// 0.16 s, 400 in 1.5 s, 900 in 15 s (DuckDB's default limit is 1000).
const maxExpressionDepth = 250

// sandboxSettings are set before DuckDB opens; the rest, and the lock,
// once the engine has made its catalog (openDuckDB).
func (e *Engine) sandboxSettings() [][2]string {
	s := [][2]string{
		{"autoinstall_known_extensions", "false"},
		{"autoload_known_extensions", "false"},
		{"allow_community_extensions", "false"},
		{"allow_unsigned_extensions", "false"},
		{"allow_persistent_secrets", "false"},
		{"max_expression_depth", fmt.Sprint(maxExpressionDepth)},
		// Apron's tables have no insertion order to keep (rows of a
		// table come from many segments, partitions and files), and
		// keeping it would make DuckDB run a scan without ORDER BY on one
		// thread: a table function cannot tell it batch order.
		{"preserve_insertion_order", "false"},
	}
	// Spilling writes files: only where the operator allows it
	// (--query-temp-dir); DuckDB would otherwise use .tmp in the working
	// directory. (An empty one is set after opening, before external
	// access is turned off: the config refuses it.)
	if e.cfg.TempDir != "" {
		s = append(s, [2]string{"temp_directory", e.cfg.TempDir})
	}
	if e.cfg.MemoryLimit > 0 {
		s = append(s, [2]string{"memory_limit", fmt.Sprintf("%dB", e.cfg.MemoryLimit)})
	}
	if e.cfg.Threads > 0 {
		s = append(s, [2]string{"threads", fmt.Sprint(e.cfg.Threads)})
	}
	return s
}

// openDuckDB opens DuckDB, registers apron_scan, makes the catalog's
// views and locks the configuration. On error nothing is left open.
func (e *Engine) openDuckDB() error {
	var dcfg duck.Config
	if duck.CreateConfig(&dcfg) == duck.StateError {
		return errors.New("query: creating DuckDB config failed")
	}
	defer duck.DestroyConfig(&dcfg)
	for _, s := range e.sandboxSettings() {
		if duck.SetConfig(dcfg, s[0], s[1]) == duck.StateError {
			return fmt.Errorf("query: DuckDB setting %s=%q refused", s[0], s[1])
		}
	}
	var msg string
	if duck.OpenExt(":memory:", &e.db, dcfg, &msg) == duck.StateError {
		return fmt.Errorf("query: opening DuckDB: %s", msg)
	}
	if duck.Connect(e.db, &e.conv) == duck.StateError {
		duck.Close(&e.db)
		return errors.New("query: connecting to DuckDB failed")
	}
	if err := e.registerScan(); err != nil {
		e.closeDuckDB()
		return err
	}
	if err := e.registerLastValue(); err != nil {
		e.closeDuckDB()
		return err
	}
	if err := e.views.init(e); err != nil {
		e.closeDuckDB()
		return err
	}
	if err := createMacros(e.conv); err != nil {
		e.closeDuckDB()
		return err
	}
	// From here on no setting changes, not even from the engine
	// (search_path and schema, which name the current database, stay
	// settable per connection: DuckDB exempts them).
	var final []string
	if e.cfg.TempDir == "" {
		final = append(final, "SET GLOBAL temp_directory = ''")
	}
	final = append(final,
		// No file at all: not the cache, not the store, not the data
		// dir. Persisted files are read by apron_scan, in Go
		// (persisted.go): DuckDB never opens a file.
		"SET GLOBAL enable_external_access = false",
		"SET GLOBAL lock_configuration = true")
	for _, stmt := range final {
		if err := exec(e.conv, stmt); err != nil {
			e.closeDuckDB()
			return fmt.Errorf("query: %s: %w", stmt, err)
		}
	}
	return nil
}
