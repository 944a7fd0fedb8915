package input

import (
	"math"
	"strconv"
	"testing"
)

func TestParseNumbers(t *testing.T) {
	for _, s := range []string{"0", "1", "-1", "+2", "12.34", "-0.5", ".5", "5.", "123456789012345", "1234567890.12345",
		"1234567890123456", "0.1", "0.000000000000001", "1e5", "1E-3", "-2.5e+10", "3.4028235e38", "1e400", "inf", "NaN", "0x1p-2", "1_0", "", "-", ".", "1.2.3", "1e", "abc"} {
		want, werr := strconv.ParseFloat(s, 64)
		if werr != nil && math.IsInf(want, 0) {
			werr = nil // ParseFloat's ±Inf with ErrRange: we refuse it
			want = 0
			if _, ok := parseFloat64([]byte(s)); ok {
				t.Errorf("parseFloat64(%q) accepted an out-of-range value", s)
			}
			continue
		}
		got, ok := parseFloat64([]byte(s))
		if ok != (werr == nil) || (ok && got != want && !(math.IsNaN(got) && math.IsNaN(want))) {
			t.Errorf("parseFloat64(%q) = %v, %v; strconv says %v, %v", s, got, ok, want, werr)
		}
	}
	for _, s := range []string{"0", "-0", "9223372036854775807", "-9223372036854775808", "9223372036854775808", "-9223372036854775809",
		"+5", "", "-", "1.0", "12a", "99999999999999999999"} {
		want, werr := strconv.ParseInt(s, 10, 64)
		got, ok := parseInt64([]byte(s))
		if ok != (werr == nil) || got != want && ok {
			t.Errorf("parseInt64(%q) = %v, %v; strconv says %v, %v", s, got, ok, want, werr)
		}
	}
	for _, s := range []string{"0", "18446744073709551615", "18446744073709551616", "+1", "-1", ""} {
		want, werr := strconv.ParseUint(s, 10, 64)
		if s == "+1" {
			want, werr = 1, nil // we take a leading +
		}
		got, ok := parseUint64([]byte(s))
		if ok != (werr == nil) || got != want && ok {
			t.Errorf("parseUint64(%q) = %v, %v; strconv says %v, %v", s, got, ok, want, werr)
		}
	}
}

func TestInferKinds(t *testing.T) {
	for _, tc := range []struct {
		values []string
		want   Kind
	}{
		{[]string{"1", "-2"}, KindInt64},
		{[]string{"1", "2.5"}, KindFloat64},
		{[]string{"1e3"}, KindFloat64},
		{[]string{"true", "False"}, KindBool},
		{[]string{"1", "true"}, KindString},
		{[]string{"1", "x"}, KindString},
		{[]string{"nan"}, KindString},
		{[]string{"2024-01-02T03:04:05Z"}, KindString},
		{nil, KindString},
	} {
		var s kindSet
		for _, v := range tc.values {
			s.observeText([]byte(v))
		}
		if got := s.kind(); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.values, got, tc.want)
		}
	}
}
