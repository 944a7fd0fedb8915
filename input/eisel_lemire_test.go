package input

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// TestEiselLemire: decimals of 16 to 19 digits, which parseFloat64 and
// the CSV scanner's nextFloat convert with eiselLemire, read as
// strconv.ParseFloat reads them, bit for bit: shortest forms of random
// float64s, the same cut to fewer decimals, random digit strings, and
// cases at a rounding boundary (which eiselLemire leaves to strconv).
func TestEiselLemire(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var cases []string
	for range 100_000 {
		f := math.Float64frombits(rng.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		cases = append(cases, strconv.FormatFloat(f, 'f', -1, 64))
		// Values a CSV of metrics holds: percentages, seconds, bytes.
		g := rng.Float64() * math.Pow(10, float64(rng.IntN(12)-4))
		cases = append(cases, strconv.FormatFloat(g, 'f', -1, 64), strconv.FormatFloat(-g, 'f', rng.IntN(20), 64))
	}
	for range 100_000 {
		n := 16 + rng.IntN(4)
		var b strings.Builder
		if rng.IntN(2) == 0 {
			b.WriteByte('-')
		}
		dot := rng.IntN(n + 1)
		for i := range n {
			if i == dot {
				b.WriteByte('.')
			}
			b.WriteByte(byte('0' + rng.IntN(10)))
		}
		cases = append(cases, b.String())
	}
	cases = append(cases,
		"9007199254740993", "9007199254740993.0", "-9007199254740995", "4503599627370497.5",
		"1.0000000000000002", "0.30000000000000004", "33.333333333333336", "9999999999999999999",
		"1000000000000000000", "0000000000000000001", "0.000000000000000001", "-0.0000000000000000",
		"179769313486231570", "2.2250738585072014", "0.1000000000000000055511151231257827",
		"0.000000000000000000", "0.99999999999999999", "9007199254740991.9", "18014398509481983.9",
	)
	checked := 0
	for _, s := range cases {
		want, werr := strconv.ParseFloat(s, 64)
		got, ok := parseFloat64([]byte(s))
		if ok != (werr == nil) || ok && math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("parseFloat64(%q) = %v (%#x), %v; strconv: %v (%#x), %v", s, got, math.Float64bits(got), ok, want, math.Float64bits(want), werr)
		}
		sc := newFieldScanner(',')
		sc.data = []byte(s + "\n")
		if v, last, ok := sc.nextFloat(); ok {
			if !last || math.Float64bits(v) != math.Float64bits(want) || sc.pos != len(sc.data) {
				t.Fatalf("nextFloat(%q) = %v, %v at %d; strconv: %v", s, v, last, sc.pos, want)
			}
			checked++
		} else if sc.pos != 0 {
			t.Fatalf("nextFloat(%q) refused it after consuming %d bytes", s, sc.pos)
		}
		// In a file the value is followed by more fields, which the
		// eight-digit reads of the fraction see past its end.
		sc.reset([]byte(s+",12345678,x"), 1, false)
		if v, last, ok := sc.nextFloat(); ok {
			if last || math.Float64bits(v) != math.Float64bits(want) || sc.pos != len(s)+1 {
				t.Fatalf("nextFloat(%q followed by a field) = %v, %v at %d; strconv: %v", s, v, last, sc.pos, want)
			}
		}
	}
	if checked < len(cases)/2 {
		t.Errorf("nextFloat took %d of %d cases", checked, len(cases))
	}
}

// TestEightDigits: eightDigits against a byte loop, on digits with one
// byte replaced by each byte value (the bytes either side of '0' and '9'
// above all).
func TestEightDigits(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for range 2000 {
		b := make([]byte, 8)
		for i := range b {
			b[i] = byte('0' + rng.IntN(10))
		}
		for pos := -1; pos < 8; pos++ {
			for c := range 256 {
				if pos >= 0 {
					b[pos] = byte(c)
				} else if c > 0 {
					break
				}
				want, wantOK := uint64(0), true
				for _, d := range b {
					if d < '0' || d > '9' {
						wantOK = false
						break
					}
					want = want*10 + uint64(d-'0')
				}
				got, ok := eightDigits(b)
				if ok != wantOK || ok && got != want {
					t.Fatalf("eightDigits(%q) = %d, %v; want %d, %v", b, got, ok, want, wantOK)
				}
			}
			if pos >= 0 {
				b[pos] = byte('0' + rng.IntN(10))
			}
		}
	}
}

// BenchmarkParseFloat17 parses the shortest forms of random percentages,
// 16 or 17 digits: strconv against parseFloat64.
func BenchmarkParseFloat17(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	vals := make([][]byte, 4096)
	for i := range vals {
		vals[i] = []byte(strconv.FormatFloat(rng.Float64()*100, 'f', -1, 64))
	}
	b.Run("strconv", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			strconv.ParseFloat(string(vals[i%len(vals)]), 64)
		}
	})
	b.Run("parseFloat64", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			parseFloat64(vals[i%len(vals)])
		}
	})
}
