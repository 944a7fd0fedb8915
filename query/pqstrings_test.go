//go:build duckdb_arrow

package query

import (
	"encoding/binary"
	"errors"
	"testing"
)

// TestPlainByteArrays: a PLAIN page of byte arrays is cut into its values;
// a page cut anywhere inside them, or a length past its end, is an
// errCorrupt, never a read beyond the page.
func TestPlainByteArrays(t *testing.T) {
	vals := []string{"host-1", "", "a much longer value than the others", "x"}
	var page []byte
	for _, v := range vals {
		page = binary.LittleEndian.AppendUint32(page, uint32(len(v)))
		page = append(page, v...)
	}
	var got []string
	if err := plainByteArrays(page, len(vals), func(i, start, end int) {
		if i != len(got) {
			t.Fatalf("value %d given as %d", len(got), i)
		}
		got = append(got, string(page[start:end]))
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(vals) {
		t.Fatalf("%d values, want %d", len(got), len(vals))
	}
	for i := range vals {
		if got[i] != vals[i] {
			t.Fatalf("value %d: %q, want %q", i, got[i], vals[i])
		}
	}
	for cut := range len(page) {
		if err := plainByteArrays(page[:cut], len(vals), func(_, _, _ int) {}); !errors.Is(err, errCorrupt) {
			t.Fatalf("page cut at %d of %d: %v, want errCorrupt", cut, len(page), err)
		}
	}
	huge := binary.LittleEndian.AppendUint32(nil, 1<<31)
	if err := plainByteArrays(append(huge, "abc"...), 1, func(_, _, _ int) {}); !errors.Is(err, errCorrupt) {
		t.Fatalf("a length past the page: %v, want errCorrupt", err)
	}
}
