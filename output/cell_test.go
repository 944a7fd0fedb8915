package output

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

func TestAppendFloat(t *testing.T) {
	for _, c := range []struct {
		f    float64
		bits int
		text string
		json string
	}{
		{0.1, 64, "0.1", "0.1"},
		{1, 64, "1", "1"},
		{100, 64, "100", "100"},
		{1234567.5, 64, "1234567.5", "1234567.5"},
		{1e20, 64, "100000000000000000000", "100000000000000000000"},
		{1e21, 64, "1e+21", "1e+21"},
		{1e-6, 64, "0.000001", "0.000001"},
		{1e-7, 64, "1e-07", "1e-07"},
		{math.Copysign(0, -1), 64, "-0", "-0"},
		{math.NaN(), 64, "nan", "null"},
		{math.Inf(1), 64, "inf", "null"},
		{math.Inf(-1), 64, "-inf", "null"},
		{float64(float32(0.1)), 32, "0.1", "0.1"},
		{math.MaxFloat64, 64, "1.7976931348623157e+308", "1.7976931348623157e+308"},
	} {
		if got := string(appendFloat(nil, c.f, c.bits, styleCSV)); got != c.text {
			t.Errorf("appendFloat(%v) = %q, want %q", c.f, got, c.text)
		}
		if got := string(appendFloat(nil, c.f, c.bits, styleJSON)); got != c.json {
			t.Errorf("appendFloat(%v, json) = %q, want %q", c.f, got, c.json)
		}
	}
}

// TestAppendTimestamp checks the hand-rolled calendar against package time
// over a spread of instants, and the fraction rule.
func TestAppendTimestamp(t *testing.T) {
	for _, c := range []struct {
		v    int64
		unit arrow.TimeUnit
		want string
	}{
		{0, arrow.Second, "1970-01-01T00:00:00"},
		{-1, arrow.Nanosecond, "1969-12-31T23:59:59.999999999"},
		{1767614400123000000, arrow.Nanosecond, "2026-01-05T12:00:00.123"},
		{1767614400123400000, arrow.Nanosecond, "2026-01-05T12:00:00.123400"},
		{1767614400000000001, arrow.Nanosecond, "2026-01-05T12:00:00.000000001"},
		{951782400, arrow.Second, "2000-02-29T00:00:00"},
		{253402300800, arrow.Second, "+10000-01-01T00:00:00"},
		{-62167219201, arrow.Second, "-0001-12-31T23:59:59"},
		{math.MaxInt64, arrow.Second, "+292277026596-12-04T15:30:07"},
		{math.MinInt64, arrow.Nanosecond, "1677-09-21T00:12:43.145224192"},
	} {
		if got := string(appendTimestamp(nil, c.v, c.unit, 'T')); got != c.want {
			t.Errorf("appendTimestamp(%d, %s) = %q, want %q", c.v, c.unit, got, c.want)
		}
	}
	for sec := int64(-80000000000); sec < 250000000000; sec += 7777777777 {
		for _, ns := range []int64{0, 1, 999999999} {
			want := time.Unix(sec, ns).UTC().Format("2006-01-02T15:04:05.000000000")
			want = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(want, "000"), "000"), "000")
			want = strings.TrimSuffix(want, ".")
			if got := string(appendTimestamp(nil, sec*1e9+ns, arrow.Nanosecond, 'T')); sec > -9e9 && sec < 9e9 && got != want {
				t.Errorf("appendTimestamp(%d.%09d) = %q, want %q", sec, ns, got, want)
			}
			if got := string(appendTimestamp(nil, sec, arrow.Second, 'T')); ns == 0 && got != want && sec > -62135596800 {
				t.Errorf("appendTimestamp(%d s) = %q, want %q", sec, got, want)
			}
		}
	}
}

func TestAppendDurationInterval(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{string(appendDuration(nil, 0, arrow.Second)), "00:00:00"},
		{string(appendDuration(nil, 90061, arrow.Second)), "1 day 01:01:01"},
		{string(appendDuration(nil, -1, arrow.Nanosecond)), "-00:00:00.000000001"},
		{string(appendDuration(nil, 400*3600, arrow.Second)), "16 days 16:00:00"},
		{string(appendDuration(nil, math.MinInt64, arrow.Nanosecond)), "-106751 days 23:47:16.854775808"},
		{string(appendInterval(nil, 0, 0, 0)), "00:00:00"},
		{string(appendInterval(nil, 25, -2, 0)), "2 years 1 month -2 days"},
		{string(appendTimeOfDay(nil, 45296789, arrow.Millisecond)), "12:34:56.789"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
