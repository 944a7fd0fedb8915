package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/apron-db/apron/query"
)

// version is set at build time: go build -ldflags "-X main.version=v1.2.3".
var version = ""

// versionInfo is what apron version prints.
type versionInfo struct {
	Version, Commit, Go, ArrowGo, DuckDB string
	Modified                             bool
}

func buildVersion() versionInfo {
	v := versionInfo{Version: version, Go: runtime.Version(), DuckDB: duckdbVersion()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if v.Version == "" {
		v.Version = bi.Main.Version // (devel) for a go build of a checkout
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	for _, d := range bi.Deps {
		if d.Path == "github.com/apache/arrow-go/v18" {
			v.ArrowGo = d.Version
		}
	}
	return v
}

func newVersionCommand(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of apron and of what it is built with",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			v := buildVersion()
			commit := v.Commit
			if commit == "" {
				commit = "unknown"
			}
			if v.Modified {
				commit += " (modified)"
			}
			fmt.Fprintf(stdout, "apron %s\ncommit   %s\ngo       %s\narrow-go %s\nduckdb   %s\n", v.Version, commit, v.Go, v.ArrowGo, v.DuckDB)
			return nil
		},
	}
}

func duckdbVersion() string { return query.DuckDBVersion() }
