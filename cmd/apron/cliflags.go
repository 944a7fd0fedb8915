package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// connFlags are the flags of every client command built on cobra: the
// connection (--host, --token, --tls-*, --timeout) and the current
// database (--db).
type connFlags struct {
	clientFlags
	db string
}

// connFlagEnv are the flags read from the environment when not given:
// APRON_HOST, APRON_TOKEN, APRON_TLS_CA, …, and APRON_DATABASE for --db.
var connFlagEnv = map[string]string{"db": "APRON_DATABASE"}

// addTo adds the flags to fs; timeout is the default of --timeout.
func (c *connFlags) addTo(fs *pflag.FlagSet, timeout time.Duration) {
	gfs := flag.NewFlagSet("", flag.ContinueOnError)
	c.clientFlags.register(gfs, timeout)
	fs.AddGoFlagSet(gfs)
	fs.StringVarP(&c.db, "db", "d", "", "the current database: tables without a database name are looked up in it (sent as the \"database\" header); env APRON_DATABASE")
}

// applyEnv sets the connection flags and --db not given on the command
// line from the environment. It runs after parsing, before the command.
func (c *connFlags) applyEnv(fs *pflag.FlagSet) error {
	names := append([]string{"db"}, clientFlagNames...)
	for _, n := range names {
		f := fs.Lookup(n)
		if f == nil || f.Changed {
			continue
		}
		env, ok := connFlagEnv[n]
		if !ok {
			env = "APRON_" + strings.ToUpper(strings.ReplaceAll(n, "-", "_"))
		}
		v, ok := os.LookupEnv(env)
		if !ok {
			continue
		}
		if err := fs.Set(n, v); err != nil {
			if n == "token" {
				return fmt.Errorf("%s: %w", env, err) // never the value
			}
			return fmt.Errorf("%s=%q: %w", env, v, err)
		}
	}
	return nil
}
