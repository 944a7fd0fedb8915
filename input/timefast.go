package input

import "encoding/binary"

// The CSV parser reads the most common timestamp text,
//
//	YYYY-MM-DD(T|' ')hh:mm:ss[.f…](Z|nothing)
//
// where it scans it, as it does numbers (nextFloat): one pass over the
// bytes instead of finding the field's end and then parsing it, and the
// date's day number reused from the previous row when its ten bytes are
// the same (rows of a time series share their date). Anything else — a
// zone offset, a missing second, more than nine fraction digits, a value
// out of range, a quote — is not taken here and goes the general way
// (parseISO), so this path only ever accepts a subset of what parseISO
// accepts, with the same value (TestScanISOFast checks both).

// dateCache is the last date a CSV worker read and its day number.
type dateCache struct {
	lo   uint64 // the date's first eight bytes
	hi   uint16 // its last two
	days int64
	ok   bool
}

// pow10ns[n] scales a fraction of n digits to nanoseconds.
var pow10ns = [10]int64{1e9, 1e8, 1e7, 1e6, 1e5, 1e4, 1e3, 1e2, 1e1, 1}

// scanISOFast reads a timestamp of the form above at data[i:] and returns
// its nanoseconds since the epoch and the index after it; ok is false when
// the text is not of that form (the caller then takes the general path).
func scanISOFast(data []byte, i int, c *dateCache) (ns int64, end int, ok bool) {
	b := data[i:]
	if len(b) < 19 || b[4] != '-' || b[7] != '-' || (b[10] != 'T' && b[10] != ' ') || b[13] != ':' || b[16] != ':' {
		return 0, 0, false
	}
	lo, hi := binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint16(b[8:])
	var days int64
	if c.ok && lo == c.lo && hi == c.hi {
		days = c.days
	} else {
		year, ok1 := digits(b[0:4])
		month, ok2 := digits(b[5:7])
		day, ok3 := digits(b[8:10])
		if !ok1 || !ok2 || !ok3 || month < 1 || month > 12 || day < 1 || day > daysIn(year, month) {
			return 0, 0, false
		}
		days = daysFromCivil(year, month, day)
		*c = dateCache{lo: lo, hi: hi, days: days, ok: true}
	}
	hour, ok1 := two(b[11], b[12])
	min, ok2 := two(b[14], b[15])
	sec, ok3 := two(b[17], b[18])
	if !ok1 || !ok2 || !ok3 || hour > 23 || min > 59 || sec > 59 {
		return 0, 0, false
	}
	j := 19
	var frac int64
	if j < len(b) && b[j] == '.' {
		j++
		start := j
		for ; j < len(b) && b[j]-'0' <= 9; j++ {
			frac = frac*10 + int64(b[j]-'0')
		}
		n := j - start
		if n == 0 || n > 9 {
			return 0, 0, false
		}
		frac *= pow10ns[n]
	}
	if j < len(b) && b[j] == 'Z' {
		j++
	}
	// days spans the years 0000-9999, ±3.7e6 days: no overflow before the
	// range check, which is parseISO's.
	secs := days*86400 + int64(hour*3600+min*60+sec)
	if secs < -9223372036 || secs > 9223372035 {
		return 0, 0, false
	}
	return secs*1e9 + frac, i + j, true
}

// two is the number of two ASCII digits.
func two(a, b byte) (int, bool) {
	a, b = a-'0', b-'0'
	return int(a)*10 + int(b), a <= 9 && b <= 9
}
