package catalog

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNameLen is the longest database, table or column name, in bytes.
const MaxNameLen = 255

// nameProblem says why name is not a valid database, table or column name,
// or returns "" if it is. It returns a constant string on success so that
// validating an accepted name does not allocate.
func nameProblem(name string, database bool) string {
	switch {
	case name == "":
		return "must not be empty"
	case len(name) > MaxNameLen:
		return fmt.Sprintf("is %d bytes long; at most %d are allowed", len(name), MaxNameLen)
	case !utf8.ValidString(name):
		return "is not valid UTF-8"
	}
	for _, r := range name {
		if !unicode.IsPrint(r) {
			return fmt.Sprintf("contains the non-printable character %U", r)
		}
	}
	if database {
		if reservedDatabase(name) {
			return "is reserved: SQL uses it for the tables that describe the server (system) or for DuckDB's own schemas"
		}
		// Database names end up in paths and URLs; keep them boring.
		for i := 0; i < len(name); i++ {
			if !isDatabaseNameByte(name[i]) {
				return "only letters, digits, '_' and '-' are allowed"
			}
		}
	}
	return ""
}

// reservedDatabase says whether name, in any case, is a schema SQL already
// has: a database by that name could not be queried.
func reservedDatabase(name string) bool {
	switch strings.ToLower(name) {
	case "system", "information_schema", "pg_catalog", "temp":
		return true
	}
	return false
}

func isDatabaseNameByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '-'
}

// ValidateDatabaseName reports whether name is a valid database name; the
// error wraps ErrInvalidName.
func ValidateDatabaseName(name string) error {
	if p := nameProblem(name, true); p != "" {
		return newError(ErrInvalidName, "catalog: invalid database name %s: %s", quoteName(name), p)
	}
	return nil
}

// ValidateTableName reports whether name is a valid table name for database
// db; the error wraps ErrInvalidName.
func ValidateTableName(db, name string) error {
	if p := nameProblem(name, false); p != "" {
		return newError(ErrInvalidName, "catalog: db %q: invalid table name %s: %s", db, quoteName(name), p)
	}
	return nil
}

// ValidateColumnName reports whether name is a valid column name for table
// db.table; the error wraps ErrInvalidName.
func ValidateColumnName(db, table, name string) error {
	if p := nameProblem(name, false); p != "" {
		return newError(ErrInvalidName, "catalog: db %q table %q: invalid column name %s: %s", db, table, quoteName(name), p)
	}
	return nil
}

// quoteName quotes a name for an error message, cutting very long names so
// that a hostile client cannot make us echo kilobytes back.
func quoteName(name string) string {
	const show = 64
	if len(name) <= show {
		return strconv.Quote(name)
	}
	return strconv.Quote(name[:show]) + "..."
}
