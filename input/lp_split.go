package input

import "bytes"

// The line-protocol decoder does not say on which line an entry starts,
// and a string field may hold newlines, so the reader finds entry
// boundaries itself with the scanner below, which follows the decoder's
// grammar only as far as needed: escapes in each section, and quotes in
// field values (the only place a newline can be inside an entry). It also
// lets the reader hand the decoder whole entries only, one block at a time.

// lpEntry is where an entry is in the file.
type lpEntry struct {
	first, last int64 // 1-based lines
}

// lpScanBlock scans b for whole entries from the start. It returns the
// offset just past the last whole entry (blank and comment lines included)
// and appends the entries' lines to entries. line is the line of b[0].
// With atEOF, a last entry without a newline counts.
func lpScanBlock(b []byte, line int64, atEOF bool, entries []lpEntry) (end int, lines int64, out []lpEntry) {
	out = entries
	i := 0
	for i < len(b) {
		// Blank lines and comments, as the decoder's skipEmptyLines.
		j := i
		for j < len(b) && b[j] == ' ' {
			j++
		}
		if j < len(b) && (b[j] == '\n' || b[j] == '#' || b[j] == '\r' && j+1 < len(b) && b[j+1] == '\n') {
			k := j
			for k < len(b) && b[k] != '\n' {
				k++
			}
			if k == len(b) {
				if !atEOF {
					return i, lines, out
				}
				return len(b), lines, out
			}
			i = k + 1
			lines++
			continue
		}
		if j == len(b) {
			if atEOF {
				return len(b), lines, out
			}
			return i, lines, out
		}
		n, nl, ok := lpEntryEnd(b[j:])
		n += j - i
		if !ok && !atEOF {
			return i, lines, out
		}
		out = append(out, lpEntry{first: line + lines, last: line + lines + nl})
		if ok {
			nl++ // the entry's own newline
		}
		lines += nl
		i += n
	}
	return i, lines, out
}

// lpEntryEnd finds the end of the entry at b[0]: the offset after its
// newline, how many newlines are inside it (in string fields), and whether
// a newline ended it (false: it runs to the end of b).
func lpEntryEnd(b []byte) (n int, inner int64, ok bool) {
	// Fast path: a newline can only be inside an entry within a quoted
	// string, so a line without a quote ends at its newline.
	nl := bytes.IndexByte(b, '\n')
	line := b
	if nl >= 0 {
		line = b[:nl]
	}
	if bytes.IndexByte(line, '"') < 0 {
		if nl < 0 {
			return len(b), 0, false
		}
		return nl + 1, 0, true
	}
	const (
		head  = iota // measurement and tags: up to an unescaped space
		key          // field key: up to '='
		value        // first byte of a field value
		str          // inside a quoted string value
		after        // rest of an unquoted value, or after a string's closing quote
		rest         // timestamp and anything after it
	)
	state, keyLen := head, 0
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c == '\n' && state != str {
			return i + 1, inner, true
		}
		switch state {
		case head:
			if c == '\\' && i+1 < len(b) && (b[i+1] == ' ' || b[i+1] == ',' || b[i+1] == '=') {
				i++
			} else if c == ' ' {
				state, keyLen = key, 0
			}
		case key:
			switch {
			case c == '\\' && i+1 < len(b) && (b[i+1] == ' ' || b[i+1] == ',' || b[i+1] == '='):
				i++
				keyLen++
			case c == '=':
				state = value
			case c == ' ':
				if keyLen > 0 {
					state = rest
				}
			default:
				keyLen++
			}
		case value:
			if c == '"' {
				state = str
			} else {
				state = after
				i-- // look at c again as part of the value
			}
		case str:
			switch c {
			case '\\':
				if i+1 < len(b) {
					switch b[i+1] {
					case '\\', '"', 'n', 'r', 't':
						i++
					}
				}
			case '"':
				state = after
			case '\n':
				inner++
			}
		case after:
			switch c {
			case ',':
				state, keyLen = key, 0
			case ' ':
				state = rest
			}
		}
	}
	return len(b), inner, false
}
