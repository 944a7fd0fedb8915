package output

import (
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
)

// Dates and times are formatted by hand rather than through time.Time:
// time.Unix(...).UTC().AppendFormat costs several times more and would
// dominate a CSV export of a timestamp column. The civil calendar is the
// proleptic Gregorian one, any int64 of any unit renders (years past 9999
// as +10000, before year 0 as -0001), and no value is refused.

// Fractions of a second are printed in whole groups of three digits, as
// few as represent the value exactly: 12:00:00, 12:00:00.100,
// 12:00:00.123456, 12:00:00.123456789. A column of milliseconds then lines
// up, and no digit is lost.

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// split returns v in unit as whole seconds (rounded down) and nanoseconds
// in [0, 1e9), without the overflow of converting to nanoseconds first.
func split(v int64, unit arrow.TimeUnit) (sec, nsec int64) {
	per := int64(1)
	switch unit {
	case arrow.Millisecond:
		per = 1e3
	case arrow.Microsecond:
		per = 1e6
	case arrow.Nanosecond:
		per = 1e9
	}
	sec = floorDiv(v, per)
	nsec = (v - sec*per) * (1e9 / per)
	return sec, nsec
}

// appendDate appends the day days after 1970-01-01 as YYYY-MM-DD
// (Howard Hinnant's civil_from_days).
func appendDate(dst []byte, days int64) []byte {
	z := days + 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y := yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d := doy - (153*mp+2)/5 + 1
	m := mp + 3
	if mp >= 10 {
		m = mp - 9
	}
	if m <= 2 {
		y++
	}
	switch {
	case y < 0:
		dst = append(dst, '-')
		dst = appendPadded(dst, -y, 4)
	case y > 9999:
		dst = append(dst, '+')
		dst = strconv.AppendInt(dst, y, 10)
	default:
		dst = appendPadded(dst, y, 4)
	}
	dst = append(dst, '-')
	dst = appendPadded(dst, m, 2)
	dst = append(dst, '-')
	return appendPadded(dst, d, 2)
}

// appendPadded appends v >= 0 with at least n digits.
func appendPadded(dst []byte, v int64, n int) []byte {
	if v < 100 && n == 2 {
		return append(dst, byte('0'+v/10), byte('0'+v%10))
	}
	var b [20]byte
	i := len(b)
	for v >= 10 || n > 1 {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		n--
	}
	i--
	b[i] = byte('0' + v)
	return append(dst, b[i:]...)
}

// appendClock appends HH:MM:SS and the fraction for secOfDay seconds and
// nsec nanoseconds; hours past 23 print as they are (a time of day out of
// range, a long duration).
func appendClock(dst []byte, secs, nsec int64) []byte {
	dst = appendPadded(dst, secs/3600, 2)
	dst = append(dst, ':')
	dst = appendPadded(dst, secs/60%60, 2)
	dst = append(dst, ':')
	dst = appendPadded(dst, secs%60, 2)
	return appendFrac(dst, nsec)
}

// appendFrac appends .ddd, .dddddd or .ddddddddd for nsec in (0, 1e9).
func appendFrac(dst []byte, nsec int64) []byte {
	switch {
	case nsec == 0:
		return dst
	case nsec%1e6 == 0:
		return appendPadded(append(dst, '.'), nsec/1e6, 3)
	case nsec%1e3 == 0:
		return appendPadded(append(dst, '.'), nsec/1e3, 6)
	}
	return appendPadded(append(dst, '.'), nsec, 9)
}

// appendTimestamp appends v (in unit since the epoch, UTC) as
// YYYY-MM-DD<sep>HH:MM:SS[.fraction].
func appendTimestamp(dst []byte, v int64, unit arrow.TimeUnit, sep byte) []byte {
	sec, nsec := split(v, unit)
	days := floorDiv(sec, 86400)
	dst = appendDate(dst, days)
	dst = append(dst, sep)
	return appendClock(dst, sec-days*86400, nsec)
}

// appendTimeOfDay appends a time32/time64 value as HH:MM:SS[.fraction]; a
// negative one (invalid in Arrow) gets a minus sign rather than a panic.
func appendTimeOfDay(dst []byte, v int64, unit arrow.TimeUnit) []byte {
	sec, nsec := split(v, unit)
	if sec < 0 {
		dst = append(dst, '-')
		sec, nsec = negate(sec, nsec)
	}
	return appendClock(dst, sec, nsec)
}

// negate returns the magnitude of the negative time (sec, nsec) as
// seconds and nanoseconds.
func negate(sec, nsec int64) (int64, int64) {
	if nsec == 0 {
		return -sec, 0
	}
	return -sec - 1, 1e9 - nsec
}

// appendDuration appends a duration as duckdb shows an interval:
// [-][N days ]HH:MM:SS[.fraction].
func appendDuration(dst []byte, v int64, unit arrow.TimeUnit) []byte {
	sec, nsec := split(v, unit)
	if sec < 0 {
		dst = append(dst, '-')
		sec, nsec = negate(sec, nsec)
	}
	if days := sec / 86400; days > 0 {
		dst = appendCount(dst, days, "day")
		dst = append(dst, ' ')
		sec -= days * 86400
	}
	return appendClock(dst, sec, nsec)
}

// appendInterval appends an Arrow interval as duckdb does: "1 year 2 months
// 3 days 04:05:06.789", parts that are zero left out, "00:00:00" if all are.
func appendInterval(dst []byte, months, days int32, nanos int64) []byte {
	start := len(dst)
	sep := func() {
		if len(dst) > start {
			dst = append(dst, ' ')
		}
	}
	if y := months / 12; y != 0 {
		dst = appendCount(dst, int64(y), "year")
	}
	if m := months % 12; m != 0 {
		sep()
		dst = appendCount(dst, int64(m), "month")
	}
	if days != 0 {
		sep()
		dst = appendCount(dst, int64(days), "day")
	}
	if nanos != 0 || len(dst) == start {
		sep()
		sec, nsec := split(nanos, arrow.Nanosecond)
		if sec < 0 {
			dst = append(dst, '-')
			sec, nsec = negate(sec, nsec)
		}
		dst = appendClock(dst, sec, nsec)
	}
	return dst
}

func appendCount(dst []byte, n int64, unit string) []byte {
	dst = strconv.AppendInt(dst, n, 10)
	dst = append(dst, ' ')
	dst = append(dst, unit...)
	if n != 1 && n != -1 {
		dst = append(dst, 's')
	}
	return dst
}
