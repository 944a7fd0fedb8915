package output

import (
	"unicode/utf8"

	"github.com/rivo/uniseg"
)

// appendJSONString appends s as a JSON string. Besides what JSON requires
// (", \ and C0 controls), every character the table escapes for the
// terminal (DEL, C1 controls, U+2028/U+2029, bidi controls: needsEscape)
// is written as \uXXXX too, so that JSON printed to a terminal cannot carry
// an escape sequence and is valid JavaScript; invalid UTF-8 becomes U+FFFD.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != 0x7f {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case needsEscape(r):
			dst = append(dst, s[start:i]...)
			dst = appendUEscape(dst, r)
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

func appendUEscape(dst []byte, r rune) []byte {
	return append(dst, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
}

// Terminal escaping (the table format). Values are hostile: a value must
// not move the cursor, start a new line, change colours or the window
// title, or reorder what follows it on the line. So, before anything is
// measured or cut:
//
//   - C0 controls become \n \t \r \a \b \v \f \e (ESC) or \xNN, DEL \x7f;
//   - C1 controls (U+0080-U+009F, among them the 8-bit CSI) become \u0080;
//   - the line and paragraph separators U+2028, U+2029 and the bidi
//     controls (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069)
//     become \u2028 and so on;
//   - each byte of invalid UTF-8 becomes \xNN.
//
// Everything else is printed as it is and measured in terminal columns by
// grapheme cluster (East Asian wide characters and emoji count two). A
// backslash is not escaped: the table is for reading, CSV and JSON are the
// exact forms.

// needsEscape reports whether r is escaped on a terminal.
func needsEscape(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r < 0xa0:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r == 0x2028, r == 0x2029:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// appendTerminalSafe appends s escaped (see above), stopping once dst has
// grown by more than limit bytes; it reports whether all of s was appended.
func appendTerminalSafe(dst, s []byte, limit int) ([]byte, bool) {
	base := len(dst)
	for i := 0; i < len(s); {
		if len(dst)-base > limit {
			return dst, false
		}
		c := s[i]
		if c >= 0x20 && c < 0x7f {
			dst = append(dst, c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, '\\', 'x', hexDigits[c>>4], hexDigits[c&0xf])
		case r < 0x20:
			dst = append(dst, '\\')
			switch r {
			case '\a':
				dst = append(dst, 'a')
			case '\b':
				dst = append(dst, 'b')
			case '\t':
				dst = append(dst, 't')
			case '\n':
				dst = append(dst, 'n')
			case '\v':
				dst = append(dst, 'v')
			case '\f':
				dst = append(dst, 'f')
			case '\r':
				dst = append(dst, 'r')
			case 0x1b:
				dst = append(dst, 'e')
			default:
				dst = append(dst, 'x', hexDigits[c>>4], hexDigits[c&0xf])
			}
		case r == 0x7f:
			dst = append(dst, `\x7f`...)
		case needsEscape(r):
			dst = appendUEscape(dst, r)
		default:
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return dst, true
}

// ellipsis marks a cut value, a left-out row and left-out columns.
const ellipsis = "…"

// displayWidth is the number of terminal columns s (already escaped) takes.
func displayWidth(s string) int {
	w := 0
	state := -1
	for len(s) > 0 {
		var cw int
		_, s, cw, state = uniseg.FirstGraphemeClusterInString(s, state)
		w += cw
	}
	return w
}

// cutToWidth returns s (already escaped) if it fits in width columns and
// is no longer than maxBytes, else its longest prefix of whole grapheme
// clusters that leaves room for "…", with "…" appended; and the width of
// the result. more says s is itself a cut of a longer value, so it gets a
// "…" even if it fits.
func cutToWidth(s string, width, maxBytes int, more bool) (string, int) {
	if width <= 0 {
		return "", 0
	}
	// One pass: the widest prefix that fits with the ellipsis (cut, cutW)
	// and the total, until the total no longer fits.
	w, cut, cutW := 0, 0, 0
	state := -1
	rest := s
	for len(rest) > 0 {
		cluster, next, cw, st := uniseg.FirstGraphemeClusterInString(rest, state)
		end := len(s) - len(next)
		if w+cw > width || end > maxBytes {
			return s[:cut] + ellipsis, cutW + 1
		}
		w += cw
		if w <= width-1 && end <= maxBytes-len(ellipsis) {
			cut, cutW = end, w
		}
		_ = cluster
		rest, state = next, st
	}
	if more {
		return s[:cut] + ellipsis, cutW + 1
	}
	return s, w
}
