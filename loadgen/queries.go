package loadgen

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Query is one statement of a query mix. Its SQL may hold {table} (the
// quoted "db"."table"), {db} (the quoted database) and {host} (a host name
// drawn per execution, without quotes).
type Query struct {
	Kind string
	SQL  string
}

// builtinQueries are the query kinds apron bench query knows, in the
// order of its default mix. They are what dashboards of CPU metrics ask:
// one series lately, one series over an hour, a roll-up of all series,
// the latest value of each, and the size of the table.
var builtinQueries = []Query{
	{"point", "SELECT * FROM {table} WHERE host = '{host}' AND time >= now() - INTERVAL 10 MINUTE"},
	{"range", "SELECT time, usage_user, usage_system, usage_idle FROM {table} WHERE host = '{host}' AND time >= now() - INTERVAL 1 HOUR ORDER BY time"},
	{"aggregate", "SELECT host, time_bucket(INTERVAL 1 MINUTE, time) AS minute, avg(usage_user) AS usage_user, max(load1) AS load1 FROM {table} WHERE time >= now() - INTERVAL 1 HOUR GROUP BY host, minute"},
	{"last", "SELECT host, max(time) AS time, arg_max(usage_user, time) AS usage_user, arg_max(usage_system, time) AS usage_system FROM {table} GROUP BY host"},
	{"count", "SELECT count(*) FROM {table}"},
}

// BuiltinKinds are the names of the built-in queries.
func BuiltinKinds() []string {
	out := make([]string, len(builtinQueries))
	for i, q := range builtinQueries {
		out[i] = q.Kind
	}
	return out
}

// BuiltinQueries is the mix of the named built-in queries, in the order
// given; no names is all of them.
func BuiltinQueries(names []string) ([]Query, error) {
	if len(names) == 0 {
		return append([]Query(nil), builtinQueries...), nil
	}
	var out []Query
	seen := map[string]bool{}
	for _, n := range names {
		n = strings.ToLower(strings.TrimSpace(n))
		if n == "" || seen[n] {
			continue
		}
		seen[n] = true
		found := false
		for _, q := range builtinQueries {
			if q.Kind == n {
				out = append(out, q)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("query %q: want one of %s", n, strings.Join(BuiltinKinds(), ", "))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no query named: want some of %s", strings.Join(BuiltinKinds(), ", "))
	}
	return out, nil
}

// ParseStatements splits text into the statements of a --sql file: at
// semicolons if it has any, else one statement a line. Blank lines and
// lines starting with "--" are left out. The split is textual: a
// semicolon inside a string literal splits it too. Statement i is of kind
// "sql<i+1>".
func ParseStatements(text string) []Query {
	var parts []string
	if strings.Contains(text, ";") {
		parts = strings.Split(text, ";")
	} else {
		parts = strings.Split(text, "\n")
	}
	var out []Query
	for _, p := range parts {
		var lines []string
		for _, l := range strings.Split(p, "\n") {
			if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "--") {
				lines = append(lines, strings.TrimRight(l, " \t\r"))
			}
		}
		if sql := strings.TrimSpace(strings.Join(lines, "\n")); sql != "" {
			out = append(out, Query{Kind: "sql" + strconv.Itoa(len(out)+1), SQL: sql})
		}
	}
	return out
}

// quoteIdent quotes a name for DuckDB.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// render is q's SQL for one execution against db.table, with a host of
// hosts drawn from rng.
func (q Query) render(db, table string, hosts int, rng *rand.Rand) string {
	sql := q.SQL
	if strings.Contains(sql, "{host}") {
		sql = strings.ReplaceAll(sql, "{host}", HostName(rng.IntN(max(hosts, 1))))
	}
	sql = strings.ReplaceAll(sql, "{table}", quoteIdent(db)+"."+quoteIdent(table))
	return strings.ReplaceAll(sql, "{db}", quoteIdent(db))
}
