//go:build duckdb_arrow

package query

import "strings"

// qualifySystem rewrites references to the system schema (system.tables,
// "system"."tables") as apron.system.…: DuckDB has a catalog of its own
// named system, and would call the bare name ambiguous. String literals,
// quoted identifiers other than "system", and comments are left alone, as
// is a name already qualified (x.system.tables).
func qualifySystem(sql string) string {
	var b strings.Builder
	prev := byte(0) // the last significant byte written, to see a qualifier
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == '\'':
			j := skipQuoted(sql, i, '\'')
			b.WriteString(sql[i:j])
			i, prev = j, '\''
			continue
		case c == '-' && strings.HasPrefix(sql[i:], "--"):
			j := strings.IndexByte(sql[i:], '\n')
			if j < 0 {
				j = len(sql) - i
			}
			b.WriteString(sql[i : i+j])
			i += j
			continue
		case c == '/' && strings.HasPrefix(sql[i:], "/*"):
			j := strings.Index(sql[i+2:], "*/")
			end := len(sql)
			if j >= 0 {
				end = i + 2 + j + 2
			}
			b.WriteString(sql[i:end])
			i = end
			continue
		case c == '"' || isIdentStart(c):
			var word, name string
			j := i
			if c == '"' {
				j = skipQuoted(sql, i, '"')
				word = sql[i:j]
				name = strings.ReplaceAll(strings.Trim(word, `"`), `""`, `"`)
			} else {
				for j < len(sql) && isIdentPart(sql[j]) {
					j++
				}
				word = sql[i:j]
				name = strings.ToLower(word)
			}
			k := j
			for k < len(sql) && (sql[k] == ' ' || sql[k] == '\t' || sql[k] == '\n' || sql[k] == '\r') {
				k++
			}
			if name == SystemSchema && k < len(sql) && sql[k] == '.' && prev != '.' {
				b.WriteString(Catalog + ".")
			}
			b.WriteString(word)
			i, prev = j, 'a'
			continue
		}
		b.WriteByte(c)
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			prev = c
		}
		i++
	}
	return b.String()
}

// skipQuoted returns the index after the quoted run starting at i, whose
// quote doubles to escape itself.
func skipQuoted(s string, i int, q byte) int {
	for j := i + 1; j < len(s); j++ {
		if s[j] == q {
			if j+1 < len(s) && s[j+1] == q {
				j++
				continue
			}
			return j + 1
		}
	}
	return len(s)
}

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

func isIdentPart(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' || c == '$' }
