package input

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestScanISOFast: whatever scanISOFast takes as a whole field, parseISO
// takes too, with the same value, whether the date came from the cache or
// not; and the common forms are taken. Inputs are valid timestamps with
// one byte changed, cut short or lengthened, so that every check of the
// fast path is met by inputs on both sides of it.
func TestScanISOFast(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	seeds := []string{
		"2026-11-29T00:00:00Z", "2026-11-29T23:59:59.999999999Z", "2024-02-29 12:30:45.5", "1677-09-22T00:00:00Z",
		"2262-04-11T23:47:15.999999999Z", "2262-04-11T23:47:16Z", "1677-09-21T00:12:43.145224192Z", "0000-01-01T00:00:00Z",
		"9999-12-31T23:59:59Z", "2023-02-28T10:00:00.000001Z", "2024-01-01T00:00:00+01:00", "2024-01-01T00:00:00.1234567891Z",
	}
	const alphabet = "0123456789-:T Zz.+,t/\"x"
	var cache dateCache
	taken := map[string]bool{}
	check := func(s string) {
		for _, c := range []*dateCache{{}, &cache} {
			ns, end, ok := scanISOFast([]byte(s+","), 0, c)
			if !ok || end != len(s) {
				continue
			}
			taken[s] = true
			want, err := parseISO([]byte(s))
			if err != nil || want != ns {
				t.Fatalf("%q: fast path %d, parseISO %d, %v", s, ns, want, err)
			}
		}
	}
	for _, seed := range seeds {
		check(seed)
		for range 20000 {
			b := []byte(seed)
			switch rng.IntN(4) {
			case 0:
				b[rng.IntN(len(b))] = alphabet[rng.IntN(len(alphabet))]
			case 1:
				b = b[:rng.IntN(len(b))]
			case 2:
				i := rng.IntN(len(b) + 1)
				b = append(b[:i], append([]byte{alphabet[rng.IntN(len(alphabet))]}, b[i:]...)...)
			case 3:
				for range 3 {
					b[rng.IntN(len(b))] = byte('0' + rng.IntN(10))
				}
			}
			check(string(b))
		}
	}
	for _, s := range []string{"2026-11-29T00:00:00Z", "2026-11-29T23:59:59.999999999Z", "2024-02-29 12:30:45.5", "2262-04-11T23:47:15.999999999Z"} {
		if !taken[s] {
			t.Errorf("%q not taken by the fast path", s)
		}
	}
	// Left to parseISO: a zone offset, more than nine fraction digits,
	// out of timestamp[ns]'s range.
	for _, s := range []string{"2024-01-01T00:00:00+01:00", "2024-01-01T00:00:00.1234567891Z", "9999-12-31T23:59:59Z", "2262-04-11T23:47:16Z"} {
		if taken[s] {
			t.Errorf("%q taken by the fast path", s)
		}
	}
	t.Logf("%d distinct fields taken", len(taken))
}

// TestCSVTimesInPlace: a file whose dates change every few rows, with
// times of every form, reads the same through the in-place path as each
// value does through parseISO.
func TestCSVTimesInPlace(t *testing.T) {
	var data strings.Builder
	var want []string
	data.WriteString("time,v\n")
	forms := []string{"2026-11-%02dT10:00:%02dZ", "2026-11-%02d 10:00:%02d.25", "2026-11-%02dT10:00:%02d.123456789Z", "2026-11-%02dT10:00:%02d+01:00", "2026-11-%02dt10:00:%02dz", "\"2026-11-%02dT10:00:%02dZ\""}
	for i := range 3000 {
		v := fmt.Sprintf(forms[i%len(forms)], 1+i/7%28, i%60)
		fmt.Fprintf(&data, "%s,%d\n", v, i)
		ns, err := parseISO([]byte(strings.Trim(v, `"`)))
		if err != nil {
			t.Fatal(v, err)
		}
		want = append(want, fmt.Sprintf("%d %d", ns, i))
	}
	for _, format := range []string{"", "rfc3339"} {
		bs := mustRead(t, "times.csv", data.String(), Options{Format: CSV, BatchRows: 1000, TimeFormat: format})
		equalStrings(t, "rows with --time-format "+format, allRows(bs), want)
	}
}
