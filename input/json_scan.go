package input

import (
	"encoding/json"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonKind is the JSON type of a value.
type jsonKind uint8

const (
	jsonNull jsonKind = iota
	jsonString
	jsonInt   // a number without fraction or exponent
	jsonFloat // any other number
	jsonBool
	jsonNested // an object or an array, kept as its JSON text
)

// jsonField is one key of a line's object. key and val point into the line
// or into the scanner's scratch, valid until the next line.
type jsonField struct {
	key  []byte
	kind jsonKind
	val  []byte // string: the decoded text; number, bool: the literal; nested: the raw JSON
}

// jsonScanner reads one flat JSON object per line without reflection or
// allocations per value: JSONL files are large and their objects shallow.
// Nested values are only delimited here and then checked by json.Valid.
type jsonScanner struct {
	b       []byte
	pos     int
	scratch []byte
	fields  []jsonField
}

// jsonError is a syntax error at a byte of the line; key is the key whose
// value it is in, when known.
type jsonError struct {
	col int // 1-based byte in the line
	key string
	msg string
}

func (e *jsonError) Error() string {
	return fmt.Sprintf("%s: invalid JSON at byte %d: %s", ErrSyntax, e.col, e.msg)
}

func (e *jsonError) Unwrap() error { return ErrSyntax }

func (s *jsonScanner) fail(key []byte, f string, a ...any) error {
	return &jsonError{col: s.pos + 1, key: string(key), msg: fmt.Sprintf(f, a...)}
}

func (s *jsonScanner) ws() {
	for s.pos < len(s.b) {
		switch s.b[s.pos] {
		case ' ', '\t', '\r', '\n':
			s.pos++
		default:
			return
		}
	}
}

// parse scans line as an object and returns its fields.
func (s *jsonScanner) parse(line []byte) ([]jsonField, error) {
	s.b, s.pos, s.fields = line, 0, s.fields[:0]
	// Decoded strings are never longer than their escaped form, so a
	// scratch of len(line) never grows and earlier slices stay valid.
	if cap(s.scratch) < len(line) {
		s.scratch = make([]byte, 0, len(line))
	}
	s.scratch = s.scratch[:0]
	s.ws()
	if s.pos >= len(s.b) || s.b[s.pos] != '{' {
		if s.pos < len(s.b) && s.b[s.pos] == '[' {
			return nil, s.fail(nil, "a line must hold one JSON object, not an array (JSON Lines: one object per line)")
		}
		return nil, s.fail(nil, "a line must hold one JSON object")
	}
	s.pos++
	s.ws()
	if s.pos < len(s.b) && s.b[s.pos] == '}' {
		s.pos++
		return s.fields, s.end()
	}
	for {
		s.ws()
		if s.pos >= len(s.b) || s.b[s.pos] != '"' {
			return nil, s.fail(nil, "expected a key in quotes")
		}
		key, err := s.str(nil)
		if err != nil {
			return nil, err
		}
		s.ws()
		if s.pos >= len(s.b) || s.b[s.pos] != ':' {
			return nil, s.fail(key, "expected ':' after the key")
		}
		s.pos++
		s.ws()
		f := jsonField{key: key}
		if err := s.value(&f); err != nil {
			return nil, err
		}
		s.fields = append(s.fields, f)
		s.ws()
		if s.pos >= len(s.b) {
			return nil, s.fail(key, "the object is not closed")
		}
		switch s.b[s.pos] {
		case ',':
			s.pos++
			continue
		case '}':
			s.pos++
			return s.fields, s.end()
		}
		return nil, s.fail(key, "expected ',' or '}' after the value")
	}
}

func (s *jsonScanner) end() error {
	s.ws()
	if s.pos != len(s.b) {
		return s.fail(nil, "text after the object (one object per line)")
	}
	return nil
}

func (s *jsonScanner) value(f *jsonField) error {
	if s.pos >= len(s.b) {
		return s.fail(f.key, "expected a value")
	}
	switch c := s.b[s.pos]; {
	case c == '"':
		v, err := s.str(f.key)
		f.kind, f.val = jsonString, v
		return err
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number(f)
	case c == '{' || c == '[':
		return s.nested(f)
	}
	for _, lit := range [...]struct {
		text string
		kind jsonKind
	}{{"true", jsonBool}, {"false", jsonBool}, {"null", jsonNull}} {
		if len(s.b)-s.pos >= len(lit.text) && string(s.b[s.pos:s.pos+len(lit.text)]) == lit.text {
			f.kind, f.val = lit.kind, s.b[s.pos:s.pos+len(lit.text)]
			s.pos += len(lit.text)
			return nil
		}
	}
	return s.fail(f.key, "expected a value")
}

// number checks the JSON number grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *jsonScanner) number(f *jsonField) error {
	b, i := s.b, s.pos
	start := i
	if b[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(b) && b[i] == '0' {
		i++
	} else if digits() == 0 {
		s.pos = i
		return s.fail(f.key, "invalid number")
	}
	kind := jsonInt
	if i < len(b) && b[i] == '.' {
		i++
		kind = jsonFloat
		if digits() == 0 {
			s.pos = i
			return s.fail(f.key, "invalid number")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		kind = jsonFloat
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			s.pos = i
			return s.fail(f.key, "invalid number")
		}
	}
	f.kind, f.val = kind, b[start:i]
	s.pos = i
	return nil
}

// nested finds the end of an object or array (brackets outside strings)
// and checks it with json.Valid; the raw text is the value.
func (s *jsonScanner) nested(f *jsonField) error {
	b := s.b
	start := s.pos
	depth := 0
	for i := start; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				raw := b[start : i+1]
				if !json.Valid(raw) {
					return s.fail(f.key, "invalid nested value")
				}
				f.kind, f.val = jsonNested, raw
				s.pos = i + 1
				return nil
			}
		}
	}
	return s.fail(f.key, "the nested value is not closed")
}

// str reads a string at s.pos (the opening quote). Without escapes it is
// a slice of the line; with them it is decoded into scratch.
func (s *jsonScanner) str(key []byte) ([]byte, error) {
	b := s.b
	i := s.pos + 1
	start := i
	for i < len(b) {
		c := b[i]
		if c == '"' {
			s.pos = i + 1
			return b[start:i], nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			s.pos = i
			return nil, s.fail(key, "control character in a string")
		}
		i++
	}
	// Slow path: decode escapes.
	out := s.scratch[len(s.scratch):]
	out = append(out, b[start:i]...)
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			s.scratch = s.scratch[:len(s.scratch)+len(out)]
			s.pos = i + 1
			return out, nil
		case c < 0x20:
			s.pos = i
			return nil, s.fail(key, "control character in a string")
		case c != '\\':
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= len(b) {
			break
		}
		e := b[i+1]
		i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(b, i)
			if !ok {
				s.pos = i
				return nil, s.fail(key, "invalid \\u escape")
			}
			i += 4
			if utf16.IsSurrogate(r) {
				r2, ok := rune(0), false
				if i+6 <= len(b) && b[i] == '\\' && b[i+1] == 'u' {
					r2, ok = hex4(b, i+2)
				}
				if dec := utf16.DecodeRune(r, r2); ok && dec != utf8.RuneError {
					r = dec
					i += 6
				} else {
					r = utf8.RuneError // a lone surrogate, as encoding/json does
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			s.pos = i - 1
			return nil, s.fail(key, "invalid escape \\%c", e)
		}
	}
	s.pos = len(b)
	return nil, s.fail(key, "the string is not closed")
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
