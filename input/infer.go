package input

import (
	"encoding/binary"
	"math"
	"strconv"
)

// sampleRows is how many data rows (CSV) or lines (JSONL) the column types
// are inferred from. A value after the sample that does not fit is an
// *Error whose message says how to set the type with --schema.
const sampleRows = 1000

// kindSet accumulates what the sampled values of one column looked like.
type kindSet uint8

const (
	sawInt kindSet = 1 << iota
	sawFloat
	sawBool
	sawString
)

// observeText records one non-empty text value (a CSV field).
func (s *kindSet) observeText(b []byte) {
	switch {
	case isIntText(b):
		*s |= sawInt
	case isFloatText(b) && isParsableFloat(b):
		*s |= sawFloat
	case isBoolText(b):
		*s |= sawBool
	default:
		*s |= sawString
	}
}

// kind is the narrowest kind that holds every observed value: integers
// mixed with decimals are float64; anything mixed with text (or bools with
// numbers) is a string; a column with no value at all is a string, which
// holds whatever comes later.
func (s kindSet) kind() Kind {
	switch s {
	case sawInt:
		return KindInt64
	case sawFloat, sawInt | sawFloat:
		return KindFloat64
	case sawBool:
		return KindBool
	}
	return KindString
}

// suggestKind is the type to propose in the --schema hint for a value v
// that did not parse as kind k: the wider number type when v is one,
// else string.
func suggestKind(k Kind, v []byte) Kind {
	switch {
	case (k == KindInt64 || k == KindUint64) && (isFloatText(v) || isIntText(v)):
		if k == KindUint64 && isIntText(v) {
			return KindInt64
		}
		return KindFloat64
	}
	return KindString
}

// isIntText: an optional sign and decimal digits that fit in an int64 (a
// longer integer is inferred as float64, which holds it approximately).
func isIntText(b []byte) bool {
	_, ok := parseInt64(b)
	return ok
}

// isFloatText: a decimal number in JSON/Go syntax: sign, digits, optional
// fraction, optional exponent. Unlike strconv.ParseFloat it refuses "inf",
// "nan", hex floats and underscores, which are more likely text than
// numbers in a CSV file.
func isFloatText(b []byte) bool {
	i := 0
	if i < len(b) && (b[i] == '-' || b[i] == '+') {
		i++
	}
	d := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		d++
	}
	if i < len(b) && b[i] == '.' {
		i++
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			d++
		}
	}
	if d == 0 {
		return false
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '-' || b[i] == '+') {
			i++
		}
		e := 0
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			e++
		}
		if e == 0 {
			return false
		}
	}
	return i == len(b)
}

// isParsableFloat: within float64's range ("1e400" is text, not +Inf).
func isParsableFloat(b []byte) bool {
	_, ok := parseFloat64(b)
	return ok
}

func isBoolText(b []byte) bool {
	_, ok := parseBool(b)
	return ok
}

// parseInt64 is strconv.ParseInt(b, 10, 64) without the string conversion
// or the error allocation.
func parseInt64(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	neg := false
	i := 0
	switch b[0] {
	case '-':
		neg, i = true, 1
	case '+':
		i = 1
	}
	if i == len(b) || len(b)-i > 19 {
		return 0, false
	}
	var n uint64
	for ; i < len(b); i++ {
		c := b[i] - '0'
		if c > 9 {
			return 0, false
		}
		n = n*10 + uint64(c) // at most 19 digits: < 1e19 < 2^64
	}
	if neg {
		if n > 1<<63 {
			return 0, false
		}
		return -int64(n), true
	}
	if n > math.MaxInt64 {
		return 0, false
	}
	return int64(n), true
}

func parseUint64(b []byte) (uint64, bool) {
	if len(b) > 0 && b[0] == '+' {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		c -= '0'
		if c > 9 {
			return 0, false
		}
		if n > (math.MaxUint64-uint64(c))/10 {
			return 0, false
		}
		n = n*10 + uint64(c)
	}
	return n, true
}

// pow10 holds the powers of ten that a float64 represents exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// parseFloat64 reads a decimal number: a plain one of at most 19 digits
// with scanDecimal, anything else with strconv.ParseFloat.
func parseFloat64(b []byte) (float64, bool) {
	f, end, ok := scanDecimal(b, 0)
	// Past 19 digits, exponents, inf and nan: the slow path reads them.
	if !ok || end != len(b) {
		return parseFloatSlow(b)
	}
	return f, true
}

// scanDecimal reads the plain decimal ([+-]digits[.digits], at most 19
// digits, no exponent) at b[i:] in one pass and returns its value and
// where it ends; ok is false for anything it does not read (no digits,
// too many, or a 16-19 digit value eiselLemire cannot round). At most 15
// digits the value is mantissa / 10^k, both exact in a float64, so the
// one division rounds correctly (the fast path of strconv's own
// algorithm); past 15 digits m may not be exact in a float64, but up to
// 19 it is in a uint64, and eiselLemire rounds it.
func scanDecimal(b []byte, i int) (f float64, end int, ok bool) {
	neg := false
	if i < len(b) && (b[i] == '-' || b[i] == '+') {
		neg = b[i] == '-'
		i++
	}
	var m uint64
	start := i
	for ; i < len(b) && b[i]-'0' <= 9; i++ {
		m = m*10 + uint64(b[i]-'0')
	}
	nd := i - start
	frac := 0
	if i < len(b) && b[i] == '.' {
		i++
		fs := i
		// Fractions of full-precision floats are long (16 digits in
		// 33.333333333333336): eight digits at a time, then one by one.
		// Past 19 digits m wraps, but such a value is refused below.
		for i+8 <= len(b) {
			v, ok := eightDigits(b[i : i+8])
			if !ok {
				break
			}
			m = m*1e8 + v
			i += 8
		}
		for ; i < len(b) && b[i]-'0' <= 9; i++ {
			m = m*10 + uint64(b[i]-'0')
		}
		frac = i - fs
		nd += frac
	}
	if nd == 0 || nd > 19 {
		return 0, i, false
	}
	if nd > 15 {
		f, ok = eiselLemire(m, -frac, neg)
		return f, i, ok
	}
	f = float64(m)
	if frac > 0 {
		f /= pow10[frac]
	}
	if neg {
		f = -f
	}
	return f, i, true
}

// eightDigits is the value of eight ASCII digits, read as one word (the
// SWAR parse of simdjson's parse_eight_digits_unrolled); ok is false when
// a byte is not a digit.
func eightDigits(b []byte) (uint64, bool) {
	v := binary.LittleEndian.Uint64(b)
	// Every byte is 0x30-0x39: its high nibble is 3, and adding 6 keeps it 3.
	if v&0xF0F0F0F0F0F0F0F0|(v+0x0606060606060606)&0xF0F0F0F0F0F0F0F0>>4 != 0x3333333333333333 {
		return 0, false
	}
	v = (v & 0x0F0F0F0F0F0F0F0F) * 2561 >> 8
	v = (v & 0x00FF00FF00FF00FF) * 6553601 >> 16
	return (v & 0x0000FFFF0000FFFF) * 42949672960001 >> 32, true
}

func parseFloatSlow(b []byte) (float64, bool) {
	// string(b) of a non-escaping argument is converted on the stack for
	// short values; ParseFloat does not keep it.
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		// A value too large is +/-Inf with ErrRange: keep it out, it is
		// almost always a broken field.
		return 0, false
	}
	return f, true
}

// parseBool accepts true and false in any case, nothing else: 0/1 and
// yes/no are ambiguous with numbers and text.
func parseBool(b []byte) (bool, bool) {
	switch len(b) {
	case 4:
		if (b[0]|0x20) == 't' && (b[1]|0x20) == 'r' && (b[2]|0x20) == 'u' && (b[3]|0x20) == 'e' {
			return true, true
		}
	case 5:
		if (b[0]|0x20) == 'f' && (b[1]|0x20) == 'a' && (b[2]|0x20) == 'l' && (b[3]|0x20) == 's' && (b[4]|0x20) == 'e' {
			return false, true
		}
	}
	return false, false
}
