package input

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// timeMode is how a timestamp value is read (Options.TimeFormat).
type timeMode uint8

const (
	timeAuto    timeMode = iota // ISO 8601 text, or an epoch number whose unit follows from its magnitude
	timeRFC3339                 // ISO 8601 / RFC 3339 text only
	timeEpoch                   // a number in a fixed unit (scale)
	timeLayout                  // a Go time layout
)

// timeParser turns a field into UTC nanoseconds since the epoch.
type timeParser struct {
	mode   timeMode
	scale  int64 // timeEpoch: nanoseconds per unit
	layout string
}

// newTimeParser reads Options.TimeFormat. Anything that is not one of the
// names must be a Go layout with at least one layout element, so that a typo
// ("secs") is refused here rather than failing on every row.
func newTimeParser(format string) (timeParser, error) {
	switch strings.ToLower(format) {
	case "", "auto":
		return timeParser{mode: timeAuto}, nil
	case "rfc3339", "iso8601", "iso":
		return timeParser{mode: timeRFC3339}, nil
	case "s":
		return timeParser{mode: timeEpoch, scale: 1e9}, nil
	case "ms":
		return timeParser{mode: timeEpoch, scale: 1e6}, nil
	case "us", "µs":
		return timeParser{mode: timeEpoch, scale: 1e3}, nil
	case "ns":
		return timeParser{mode: timeEpoch, scale: 1}, nil
	}
	ref := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	if ref.Format(format) == format {
		return timeParser{}, schemaf("--time-format %q is neither auto, rfc3339, s, ms, us, ns nor a Go time layout (e.g. \"2006-01-02 15:04:05\")", format)
	}
	return timeParser{mode: timeLayout, layout: format}, nil
}

var errTimeRange = errors.New("outside the range of timestamp[ns], 1677-09-21 to 2262-04-11")

// parse returns b as nanoseconds since the Unix epoch, UTC.
func (p timeParser) parse(b []byte) (int64, error) {
	switch p.mode {
	case timeAuto:
		if n, ok := parseInt64(b); ok { // the common epoch case, in one pass
			return epochInt(p, n)
		}
		if looksNumeric(b) {
			return parseEpochAuto(b)
		}
		return parseISO(b)
	case timeRFC3339:
		return parseISO(b)
	case timeEpoch:
		if n, ok := parseInt64(b); ok {
			return epochInt(p, n)
		}
		return parseEpoch(b, p.scale)
	}
	t, err := time.Parse(p.layout, string(b))
	if err != nil {
		return 0, fmt.Errorf("does not match the layout %q", p.layout)
	}
	return timeToNanos(t)
}

// looksNumeric: b is an epoch number rather than a date ("2024" alone is
// read as a number: a bare year is not a useful time).
func looksNumeric(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	i := 0
	if b[0] == '-' || b[0] == '+' {
		i = 1
	}
	if i >= len(b) {
		return false
	}
	for ; i < len(b); i++ {
		if (b[i] < '0' || b[i] > '9') && b[i] != '.' {
			return false
		}
	}
	return true
}

// parseEpochAuto picks the unit from the magnitude of the integer part:
// below 1e11 seconds (up to the year 5138), below 1e14 milliseconds, below
// 1e17 microseconds, else nanoseconds. Every time between 1973 and 5138 is
// read right in each unit; only tiny epoch values in ms/us/ns (the first
// days of 1970) would be misread, which is why --time-format exists.
func parseEpochAuto(b []byte) (int64, error) {
	intPart := b
	for i, c := range b {
		if c == '.' {
			intPart = b[:i]
			break
		}
	}
	d := intPart
	if len(d) > 0 && (d[0] == '-' || d[0] == '+') {
		d = d[1:]
	}
	for len(d) > 1 && d[0] == '0' {
		d = d[1:]
	}
	// Compare magnitudes by digit count, which cannot overflow.
	digits := len(d)
	switch {
	case digits <= 11:
		return parseEpoch(b, 1e9)
	case digits <= 14:
		return parseEpoch(b, 1e6)
	case digits <= 17:
		return parseEpoch(b, 1e3)
	}
	return parseEpoch(b, 1)
}

// parseEpoch reads an integer, or a decimal when the unit is coarser than
// nanoseconds (fraction digits past the nanosecond are refused rather than
// rounded), times scale.
func parseEpoch(b []byte, scale int64) (int64, error) {
	if len(b) == 0 {
		return 0, errors.New("empty")
	}
	neg := false
	i := 0
	switch b[0] {
	case '-':
		neg, i = true, 1
	case '+':
		i = 1
	}
	var whole uint64
	start := i
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		if whole > (math.MaxUint64-9)/10 {
			return 0, errTimeRange
		}
		whole = whole*10 + uint64(b[i]-'0')
	}
	if i == start {
		return 0, errors.New("not a number")
	}
	var frac int64 // in nanoseconds
	if i < len(b) && b[i] == '.' {
		i++
		f := int64(0)
		unit := scale
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			unit /= 10
			d := int64(b[i] - '0')
			if unit == 0 {
				if d != 0 {
					return 0, errors.New("finer than a nanosecond")
				}
				continue
			}
			f += d * unit
		}
		frac = f
	}
	if i != len(b) {
		return 0, errors.New("not a number")
	}
	if whole > uint64(math.MaxInt64)/uint64(scale) {
		return 0, errTimeRange
	}
	ns := int64(whole)*scale + frac
	if ns < 0 {
		return 0, errTimeRange
	}
	if neg {
		ns = -ns
	}
	return ns, nil
}

// parseISO reads ISO 8601 / RFC 3339 text without time.Parse (which is
// several times slower and allocates on error):
//
//	YYYY-MM-DD[(T|t|' ')hh:mm[:ss[(.|,)fraction]]][Z|z|±hh[[:]mm]]
//
// No zone means UTC. A bare date is midnight UTC.
func parseISO(b []byte) (int64, error) {
	bad := func() (int64, error) {
		return 0, errors.New("not an RFC 3339 / ISO 8601 time (e.g. 2024-01-02T03:04:05Z)")
	}
	if len(b) < 10 || b[4] != '-' || b[7] != '-' {
		return bad()
	}
	year, ok1 := digits(b[0:4])
	month, ok2 := digits(b[5:7])
	day, ok3 := digits(b[8:10])
	if !ok1 || !ok2 || !ok3 || month < 1 || month > 12 || day < 1 || day > daysIn(year, month) {
		return bad()
	}
	var hour, min, sec, nsec int
	rest := b[10:]
	if len(rest) > 0 {
		if rest[0] != 'T' && rest[0] != 't' && rest[0] != ' ' {
			return bad()
		}
		if len(rest) < 6 || rest[3] != ':' {
			return bad()
		}
		var okh, okm bool
		hour, okh = digits(rest[1:3])
		min, okm = digits(rest[4:6])
		if !okh || !okm || hour > 23 || min > 59 {
			return bad()
		}
		rest = rest[6:]
		if len(rest) >= 3 && rest[0] == ':' {
			var oks bool
			sec, oks = digits(rest[1:3])
			if !oks || sec > 59 {
				return bad()
			}
			rest = rest[3:]
			if len(rest) > 1 && (rest[0] == '.' || rest[0] == ',') {
				i := 1
				scale := 100000000
				for ; i < len(rest) && rest[i] >= '0' && rest[i] <= '9'; i++ {
					nsec += int(rest[i]-'0') * scale
					scale /= 10
				}
				if i == 1 {
					return bad()
				}
				rest = rest[i:]
			}
		}
	}
	offset := 0 // seconds east of UTC
	if len(rest) > 0 {
		switch rest[0] {
		case 'Z', 'z':
			if len(rest) != 1 {
				return bad()
			}
		case '+', '-':
			sign := 1
			if rest[0] == '-' {
				sign = -1
			}
			z := rest[1:]
			var oh, om int
			var ok bool
			switch {
			case len(z) == 2:
				oh, ok = digits(z)
			case len(z) == 4:
				oh, ok = digits(z[:2])
				if ok {
					om, ok = digits(z[2:])
				}
			case len(z) == 5 && z[2] == ':':
				oh, ok = digits(z[:2])
				if ok {
					om, ok = digits(z[3:])
				}
			}
			if !ok || oh > 23 || om > 59 {
				return bad()
			}
			offset = sign * (oh*3600 + om*60)
		default:
			return bad()
		}
	}
	secs := daysFromCivil(year, month, day)*86400 + int64(hour*3600+min*60+sec-offset)
	// timestamp[ns] spans ±9.22e9 seconds; check before multiplying.
	if secs < -9223372036 || secs > 9223372035 {
		return 0, errTimeRange
	}
	return secs*1e9 + int64(nsec), nil
}

func digits(b []byte) (int, bool) {
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

func daysIn(year, month int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil is Howard Hinnant's days_from_civil: days since 1970-01-01
// of a proleptic Gregorian date.
func daysFromCivil(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era = (y - 399) / 400
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era)*146097 + int64(doe) - 719468
}

func timeToNanos(t time.Time) (int64, error) {
	s := t.Unix()
	if s < -9223372036 || s > 9223372035 {
		return 0, errTimeRange
	}
	return t.UnixNano(), nil
}
