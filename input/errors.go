package input

import (
	"errors"
	"fmt"
	"strings"
)

// Error is a malformed input: it says where (file, line or row, column) so
// that the user can open the file at the spot. Line is 1-based and set for
// the text formats; Row is the 0-based data row, set where lines mean
// nothing (Parquet, Arrow) and 0 otherwise. Column is "" when the fault is
// not in one column (a row with too many fields, a JSON syntax error before
// the first key).
type Error struct {
	File   string
	Line   int64
	Row    int64
	Column string
	Err    error
}

// Error formats as file:line: column "c": cause, the shape compilers use, so
// that editors and terminals can jump to it.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	switch {
	case e.Line > 0:
		fmt.Fprintf(&b, ":%d", e.Line)
	case e.Row > 0:
		fmt.Fprintf(&b, ": row %d", e.Row)
	}
	b.WriteString(": ")
	if e.Column != "" {
		fmt.Fprintf(&b, "column %q: ", e.Column)
	}
	if e.Err != nil {
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Sentinels that callers (the CLI, tests) can match with errors.Is; the
// messages around them say what to change.
var (
	// ErrSyntax: the bytes are not valid in the format (quoting, JSON,
	// line protocol).
	ErrSyntax = errors.New("syntax error")
	// ErrType: a value does not parse as its column's type.
	ErrType = errors.New("type mismatch")
	// ErrSchema: the header, --schema, --time-column or a column set is
	// inconsistent.
	ErrSchema = errors.New("schema error")
	// ErrFormat: the format is unknown or could not be detected.
	ErrFormat = errors.New("unknown format")
)

// syntaxf returns an error wrapping ErrSyntax.
func syntaxf(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrSyntax}, a...)...)
}

// schemaf returns an error wrapping ErrSchema.
func schemaf(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrSchema}, a...)...)
}

// typeError is a value that does not parse as its column's type. hint says
// how the column got its type, so that the message can say how to change it.
type typeError struct {
	value  []byte
	kind   Kind
	reason string // optional detail (out of range, …)
}

// newTypeError copies v: it usually points into a read buffer that is
// reused once the error is on its way.
func newTypeError(v []byte, k Kind, reason string) *typeError {
	return &typeError{value: append([]byte(nil), v...), kind: k, reason: reason}
}

func (e *typeError) Error() string {
	v := string(e.value)
	if len(v) > 64 {
		v = v[:64] + "…"
	}
	s := fmt.Sprintf("%q is not a%s %s", v, article(e.kind), e.kind)
	if e.reason != "" {
		s += " (" + e.reason + ")"
	}
	return s
}

func (e *typeError) Unwrap() error { return ErrType }

func article(k Kind) string {
	switch k {
	case KindInt64, KindUint64:
		return "n"
	}
	return ""
}

// withHint appends how the column got its type and how to override it;
// suggest is the type that would hold the value (see suggestKind).
func withHint(err error, column string, origin typeOrigin, sample int, suggest Kind) error {
	if te, ok := err.(*typeError); ok && te.kind == KindString {
		return err // invalid UTF-8: no type would hold it
	}
	switch origin {
	case originInferred:
		return fmt.Errorf("%w (the column's type was inferred from the first %d rows; set it with --schema %s:%s)", err, sample, column, suggest)
	case originLate:
		return fmt.Errorf("%w (the column first appeared after the first %d rows; set its type with --schema %s:%s)", err, sample, column, suggest)
	case originTime:
		return fmt.Errorf("%w (the time column; set its format with --time-format)", err)
	}
	return fmt.Errorf("%w (the type given by --schema)", err)
}
