package input

import (
	"testing"
	"time"
)

// TestParseISO compares the hand-written parser with time.Parse.
func TestParseISO(t *testing.T) {
	for _, s := range []string{
		"1970-01-01T00:00:00Z", "1969-12-31T23:59:59.999999999Z", "1900-01-01T00:00:00Z", "1677-09-22T00:00:00Z",
		"2000-02-29T12:00:00Z", "2024-02-29T00:00:00+14:00", "2262-04-11T00:00:00Z", "2024-12-31T23:59:59.5-05:30",
		"2024-06-01T10:20:30.123Z",
	} {
		want, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseISO([]byte(s))
		if err != nil || got != want.UnixNano() {
			t.Errorf("parseISO(%q) = %d, %v; want %d", s, got, err, want.UnixNano())
		}
	}
	for _, s := range []string{"", "2024", "2024-13-01", "2023-02-29", "2024-01-32", "2024-01-01T24:00", "2024-01-01T00:60",
		"2024-01-01T00:00:60Z", "2024-01-01X", "2024-01-01T00:00Z+", "2024-01-01T00:00:00.Z", "2024-01-01T00:00:00+1", "1600-01-01", "2300-01-01"} {
		if ns, err := parseISO([]byte(s)); err == nil {
			t.Errorf("parseISO(%q) = %d, want an error", s, ns)
		}
	}
}

func TestTimeFormatOption(t *testing.T) {
	for _, bad := range []string{"secs", "x", "unix"} {
		if _, err := newTimeParser(bad); err == nil {
			t.Errorf("newTimeParser(%q) accepted", bad)
		}
	}
	for _, good := range []string{"", "auto", "RFC3339", "s", "MS", "us", "ns", time.DateTime, "Jan 2 2006"} {
		if _, err := newTimeParser(good); err != nil {
			t.Errorf("newTimeParser(%q): %v", good, err)
		}
	}
	p, _ := newTimeParser("ns")
	if _, err := p.parse([]byte("1.5")); err == nil {
		t.Error(`ns "1.5" accepted`) // finer than a nanosecond
	}
	if ns, err := p.parse([]byte("-5")); err != nil || ns != -5 {
		t.Errorf(`ns "-5": %d, %v`, ns, err)
	}
	s, _ := newTimeParser("s")
	if _, err := s.parse([]byte("99999999999999")); err == nil {
		t.Error("s overflow accepted")
	}
}
