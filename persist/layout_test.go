package persist

import (
	"errors"
	"strings"
	"testing"

	"github.com/apron-db/apron/objstore"
)

func TestSegmentFileNames(t *testing.T) {
	day := t0.Unix() / 86400
	for _, c := range []struct{ db, table, want string }{
		{"db", "cpu", "dbs/db/cpu/2026-11-29/00000000000000000007.parquet"},
		{"db", "a/b c", "dbs/db/a%2Fb%20c/2026-11-29/00000000000000000007.parquet"},
		{"db", ".hidden", "dbs/db/%2Ehidden/2026-11-29/00000000000000000007.parquet"},
		{"db", "..", "dbs/db/%2E./2026-11-29/00000000000000000007.parquet"},
	} {
		got := ParquetObject(c.db, c.table, day, 7)
		if got != c.want {
			t.Errorf("%q.%q: %q, want %q", c.db, c.table, got, c.want)
		}
		if err := objstore.ValidateName(got); err != nil {
			t.Error(err)
		}
	}
	if got := CatalogObject(7); got != "catalogs/00000000000000000007.json" {
		t.Errorf("CatalogObject(7) = %q", got)
	}
	if got := SegmentObject(12); got != "segments/00000000000000000012.json" {
		t.Errorf("SegmentObject(12) = %q", got)
	}
}

func TestSegmentFileRoundTrip(t *testing.T) {
	seg := Segment{ID: 12, CatalogVersion: 7, FirstSequence: 1001, LastSequence: 1450, Rows: 100, WriterID: "w",
		Files: []File{{Path: "dbs/metrics/cpu/2026-11-29/00000000000000000012.parquet", URI: "not stored", Size: 1 << 20,
			CRC32C: 1234567, Rows: 100, MinTime: 1, MaxTime: 2, Database: "metrics", Table: "cpu", Partition: "2026-11-29"}}}
	data, err := EncodeSegmentFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"format_version": 1,`) || strings.Contains(string(data), "not stored") {
		t.Fatalf("segment file:\n%s", data)
	}
	got, err := DecodeSegmentFile(SegmentObject(12), data)
	if err != nil {
		t.Fatal(err)
	}
	seg.Files[0].URI = ""
	if got.ID != seg.ID || got.CatalogVersion != seg.CatalogVersion || got.FirstSequence != seg.FirstSequence ||
		got.LastSequence != seg.LastSequence || got.Rows != seg.Rows || got.WriterID != seg.WriterID ||
		len(got.Files) != 1 || got.Files[0] != seg.Files[0] {
		t.Fatalf("decoded %+v, want %+v", got, seg)
	}
}

func TestSegmentFileRefused(t *testing.T) {
	good := `{"format_version": 1, "segment_id": 12, "catalog_version": 7, "first_sequence": 1, "last_sequence": 2, "rows": 0, "files": []}`
	for _, c := range []struct{ name, object, data string }{
		{"not_json", SegmentObject(12), `{"format_version": 1,`},
		{"no_version", SegmentObject(12), `{"segment_id": 12}`},
		{"other_version", SegmentObject(12), strings.Replace(good, `"format_version": 1`, `"format_version": 2`, 1)},
		{"unknown_field", SegmentObject(12), strings.Replace(good, `"rows": 0`, `"rows": 0, "extra": 1`, 1)},
		{"other_segment", SegmentObject(13), good},
		{"file_outside_dbs", SegmentObject(12), strings.Replace(good, `"files": []`, `"files": [{"path": "segments/x"}]`, 1)},
		{"negative_rows", SegmentObject(12), strings.Replace(good, `"files": []`, `"files": [{"path": "dbs/x", "rows": -1}]`, 1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := DecodeSegmentFile(c.object, []byte(c.data)); !errors.Is(err, ErrSegmentFile) {
				t.Fatalf("DecodeSegmentFile: %v, want ErrSegmentFile", err)
			}
		})
	}
	if _, err := DecodeSegmentFile(SegmentObject(12), []byte(good)); err != nil {
		t.Fatal(err)
	}
}
