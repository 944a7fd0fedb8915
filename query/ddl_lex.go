//go:build duckdb_arrow

package query

import (
	"errors"
	"strings"
)

// The tokens of the DDL grammar (ddl.go): words (bare identifiers and
// keywords, compared without case), quoted identifiers ("…", "" inside
// for a quote), unsigned integers, and the symbols ( ) , . ;. Comments
// (-- to the end of the line, /* … */) and white space separate tokens.
// Anything else (a string literal, an operator) is not DDL Apron runs.

type ddlTokenKind int

const (
	tokWord ddlTokenKind = iota
	tokQuoted
	tokNumber
	tokSymbol
)

type ddlToken struct {
	kind ddlTokenKind
	text string // the word as written, the quoted identifier unquoted, the number or symbol
}

func (t ddlToken) isWord(w string) bool { return t.kind == tokWord && strings.EqualFold(t.text, w) }

var errNotDDLToken = errors.New("not a DDL token")

func ddlTokens(sql string) ([]ddlToken, error) {
	var out []ddlToken
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f':
			i++
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			for i < len(sql) && sql[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			end := strings.Index(sql[i+2:], "*/")
			if end < 0 {
				return nil, errNotDDLToken
			}
			i += 2 + end + 2
		case c == '"':
			var b strings.Builder
			j := i + 1
			for {
				if j >= len(sql) {
					return nil, errNotDDLToken
				}
				if sql[j] == '"' {
					if j+1 < len(sql) && sql[j+1] == '"' {
						b.WriteByte('"')
						j += 2
						continue
					}
					break
				}
				b.WriteByte(sql[j])
				j++
			}
			if b.Len() == 0 {
				return nil, errNotDDLToken
			}
			out = append(out, ddlToken{tokQuoted, b.String()})
			i = j + 1
		case isWordStart(c):
			j := i + 1
			for j < len(sql) && (isWordStart(sql[j]) || sql[j] >= '0' && sql[j] <= '9' || sql[j] == '$') {
				j++
			}
			out = append(out, ddlToken{tokWord, sql[i:j]})
			i = j
		case c >= '0' && c <= '9':
			j := i + 1
			for j < len(sql) && sql[j] >= '0' && sql[j] <= '9' {
				j++
			}
			out = append(out, ddlToken{tokNumber, sql[i:j]})
			i = j
		case strings.IndexByte("(),.;", c) >= 0:
			out = append(out, ddlToken{tokSymbol, sql[i : i+1]})
			i++
		default:
			return nil, errNotDDLToken
		}
	}
	return out, nil
}

// isWordStart: ASCII letters and '_' (DuckDB also takes other letters in
// bare names; those need quotes here).
func isWordStart(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' }

// ddlScanner walks the tokens.
type ddlScanner struct {
	toks []ddlToken
	i    int
}

func (s *ddlScanner) peek() (ddlToken, bool) {
	if s.i >= len(s.toks) {
		return ddlToken{}, false
	}
	return s.toks[s.i], true
}

// word consumes the keyword w if it is next.
func (s *ddlScanner) word(w string) bool {
	if t, ok := s.peek(); ok && t.isWord(w) {
		s.i++
		return true
	}
	return false
}

// symbol consumes the symbol c if it is next.
func (s *ddlScanner) symbol(c string) bool {
	if t, ok := s.peek(); ok && t.kind == tokSymbol && t.text == c {
		s.i++
		return true
	}
	return false
}

// name consumes an identifier: a quoted one as written, a bare one as
// written too (Apron's names keep their case; SQL resolves them without
// it, and the catalog refuses names that differ only in case).
func (s *ddlScanner) name() (string, bool) {
	t, ok := s.peek()
	if !ok || (t.kind != tokWord && t.kind != tokQuoted) {
		return "", false
	}
	s.i++
	return t.text, true
}

// qualifiedName consumes name(.name)*.
func (s *ddlScanner) qualifiedName() ([]string, bool) {
	var parts []string
	for {
		n, ok := s.name()
		if !ok {
			return nil, false
		}
		parts = append(parts, n)
		if !s.symbol(".") {
			return parts, true
		}
	}
}

// typeStop are the words that end a column's type.
var typeStop = map[string]bool{"NOT": true, "NULL": true, "PRIMARY": true, "DEFAULT": true, "UNIQUE": true,
	"CHECK": true, "REFERENCES": true, "CONSTRAINT": true, "COLLATE": true, "GENERATED": true}

// columnDefs consumes ( column type [NULL | NOT NULL], … ). msg says what
// is wrong, if anything.
func (s *ddlScanner) columnDefs() ([]ddlColumn, string) {
	if !s.symbol("(") {
		return nil, "expected ( and the table's columns"
	}
	var cols []ddlColumn
	for {
		if t, ok := s.peek(); ok && t.kind == tokWord && (t.isWord("PRIMARY") || t.isWord("UNIQUE") || t.isWord("CONSTRAINT") || t.isWord("FOREIGN") || t.isWord("CHECK")) {
			return nil, "table constraints (" + strings.ToUpper(t.text) + ") are not supported"
		}
		name, ok := s.name()
		if !ok {
			return nil, "expected a column name"
		}
		typ, msg := s.columnType()
		if msg != "" {
			return nil, "column " + quoteIdent(name) + ": " + msg
		}
		c := ddlColumn{name: name, typ: typ}
		switch {
		case s.word("NULL"):
		case s.word("NOT"):
			if !s.word("NULL") {
				return nil, "column " + quoteIdent(name) + ": expected NULL after NOT"
			}
			c.notNull = true
		}
		if t, ok := s.peek(); ok && t.kind == tokWord && typeStop[strings.ToUpper(t.text)] {
			return nil, "column " + quoteIdent(name) + ": " + strings.ToUpper(t.text) + " is not supported (no constraints, defaults or keys)"
		}
		cols = append(cols, c)
		if s.symbol(")") {
			return cols, ""
		}
		if !s.symbol(",") {
			return nil, "expected , or ) after column " + quoteIdent(name)
		}
	}
}

// columnType consumes a type: words, numbers and balanced parentheses
// with commas inside, up to the column's end or a constraint word.
func (s *ddlScanner) columnType() (string, string) {
	var b strings.Builder
	depth := 0
	for {
		t, ok := s.peek()
		if !ok {
			return "", "the statement ends inside the column list"
		}
		if depth == 0 {
			if t.kind == tokSymbol && (t.text == "," || t.text == ")") {
				break
			}
			if t.kind == tokWord && typeStop[strings.ToUpper(t.text)] {
				break
			}
		}
		switch {
		case t.kind == tokWord || t.kind == tokNumber:
			if b.Len() > 0 && !strings.HasSuffix(b.String(), "(") {
				b.WriteByte(' ')
			}
			b.WriteString(t.text)
		case t.kind == tokSymbol && t.text == "(":
			depth++
			b.WriteByte('(')
		case t.kind == tokSymbol && t.text == ")":
			depth--
			b.WriteByte(')')
		case t.kind == tokSymbol && t.text == "," && depth > 0:
			b.WriteByte(',')
		default:
			return "", "unexpected " + t.text + " in the type"
		}
		s.i++
		if b.Len() > 256 {
			return "", "type too long"
		}
	}
	if b.Len() == 0 {
		return "", "expected a type"
	}
	return b.String(), ""
}
