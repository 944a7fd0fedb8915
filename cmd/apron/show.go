package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"

	"github.com/spf13/cobra"
)

// showQueries are the system tables apron show reads, by what it
// shows. byDB says whether the table has a database_name to filter on
// with --db.
var showQueries = map[string]struct {
	sql   string
	byDB  bool
	order string
	short string
}{
	"databases": {"SELECT * FROM system.databases", true, "database_name", "databases and their table counts"},
	"tables":    {"SELECT * FROM system.tables", true, "database_name, table_name", "tables and their column counts"},
	"columns":   {"SELECT * FROM system.columns", true, "database_name, table_name, column_name", "every table's columns and types"},
	"segments":  {"SELECT * FROM system.segments", false, "segment_id", "buffered segments: open, closed, persisting"},
	"files":     {"SELECT * FROM system.parquet_files", true, "database_name, table_name, path", "persisted Parquet files"},
	"queries":   {"SELECT * FROM system.queries", true, "query_id", "queries running now"},
	"tokens":    {"SELECT * FROM system.tokens", false, "created", "API tokens (admin only)"},
}

func showNames() []string {
	var names []string
	for n := range showQueries {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func newShowCommand(stdout, stderr io.Writer) *cobra.Command {
	f := &queryFlags{}
	var lines []string
	for _, n := range showNames() {
		lines = append(lines, fmt.Sprintf("  %-10s %s", n, showQueries[n].short))
	}
	cmd := &cobra.Command{
		Use:   "show " + strings.Join(showNames(), "|"),
		Short: "Show what a server holds, from its system tables",
		Long: "Show what a server holds, from its system tables (with --db, only that database's):\n\n" +
			strings.Join(lines, "\n") + "\n\nThe same as apron query \"SELECT * FROM system.<table>\", in the same formats.",
		Args:      cobra.ExactArgs(1),
		ValidArgs: showNames(),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.conn.applyEnv(cmd.Flags()); err != nil {
				return err
			}
			q, ok := showQueries[args[0]]
			if !ok {
				return usageErrorf("apron show %s: want one of %s", args[0], strings.Join(showNames(), ", "))
			}
			sql := q.sql
			if q.byDB && f.conn.db != "" {
				sql += " WHERE database_name = " + sqlString(f.conn.db)
			}
			sql += " ORDER BY " + q.order
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			return runQuery(ctx, f, sql, stdout, stderr)
		},
	}
	f.conn.addTo(cmd.Flags(), 0)
	f.addOutputFlags(cmd)
	return cmd
}

// sqlString is s as an SQL string literal.
func sqlString(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
