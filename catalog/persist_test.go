package catalog

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// sample builds a catalog exercising every type, several databases and
// column additions, so that IDs are not all trivially positional.
func sample(t testing.TB) *Catalog {
	c := New(Limits{})
	write(t, c, "metrics", "cpu", sch(fld("host", str), fld("time", tsNs), fld("usage", f64)))
	write(t, c, "logs", "app", sch(fld("time", tsNs),
		fld("i8", arrow.PrimitiveTypes.Int8), fld("i16", arrow.PrimitiveTypes.Int16), fld("i32", arrow.PrimitiveTypes.Int32), fld("i64", i64),
		fld("u8", arrow.PrimitiveTypes.Uint8), fld("u16", arrow.PrimitiveTypes.Uint16), fld("u32", arrow.PrimitiveTypes.Uint32), fld("u64", arrow.PrimitiveTypes.Uint64),
		fld("f32", arrow.PrimitiveTypes.Float32), fld("f64", f64), fld("ok", arrow.FixedWidthTypes.Boolean),
		fld("msg", arrow.BinaryTypes.LargeString), fld("raw", arrow.BinaryTypes.LargeBinary),
		fld("at", &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "Europe/Paris"}),
		fld("d32", arrow.FixedWidthTypes.Date32), fld("d64", arrow.FixedWidthTypes.Date64)))
	write(t, c, "metrics", "cpu", sch(fld("time", tsNs), fld("region", str)))
	write(t, c, "metrics", "mem", sch(fld("time", tsNs), fld("free", i64)))
	return c
}

func TestSaveLoadRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.json")
	c := sample(t)
	if err := c.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Version() != c.Version() {
		t.Errorf("version = %d, want %d", got.Version(), c.Version())
	}
	want := c.Snapshot()
	if len(got.Databases()) != len(want.Databases()) {
		t.Fatalf("databases = %d, want %d", len(got.Databases()), len(want.Databases()))
	}
	for _, d := range want.Databases() {
		gd, ok := got.Database(d.Name)
		if !ok || gd.ID != d.ID || len(gd.Tables) != len(d.Tables) {
			t.Fatalf("database %q: got %+v", d.Name, gd)
		}
		for _, wt := range d.TableList() {
			gt, ok := got.Table(d.Name, wt.Name)
			if !ok || gt.ID != wt.ID || gt.Database != d.Name {
				t.Fatalf("table %s.%s missing or wrong ID", d.Name, wt.Name)
			}
			if !gt.ArrowSchema().Equal(wt.ArrowSchema()) {
				t.Errorf("%s.%s schema = %v, want %v", d.Name, wt.Name, gt.ArrowSchema(), wt.ArrowSchema())
			}
			for i, col := range wt.Columns {
				if gt.Columns[i].ID != col.ID || gt.Columns[i].Name != col.Name {
					t.Errorf("%s.%s column %d = %+v, want %+v", d.Name, wt.Name, i, gt.Columns[i], col)
				}
			}
		}
	}
	if cpuT, _ := got.Table("metrics", "cpu"); colSummary(cpuT.Columns) != "time:timestamp[ns],host:utf8,usage:float64,region:utf8" {
		t.Errorf("cpu columns = %s", colSummary(cpuT.Columns))
	}

	// The loaded catalog keeps handing out fresh IDs and accepts the same
	// writes as the original without change.
	if ch, err := got.PlanWrite("logs", "app", sch(fld("time", tsNs), fld("at", &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "Europe/Paris"})), WriteOptions{}); ch != nil || err != nil {
		t.Fatalf("PlanWrite after Load = %+v, %v", ch, err)
	}
	write(t, got, "new", "t", cpu())
	nt, _ := got.Table("new", "t")
	nd, _ := got.Database("new")
	if nt.ID != 4 || nd.ID != 3 {
		t.Errorf("after Load new table ID = %d, database ID = %d; want 4, 3", nt.ID, nd.ID)
	}
}

func TestLoadMissingFileIsEmpty(t *testing.T) {
	c, err := Load(filepath.Join(t.TempDir(), "catalog.json"), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Version() != 0 || len(c.Databases()) != 0 {
		t.Fatalf("catalog not empty: version %d", c.Version())
	}
}

func TestLoadCorrupt(t *testing.T) {
	valid := func(t *testing.T) string {
		data, err := encodeSnapshot(sample(t).Snapshot())
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	cases := []struct {
		name string
		edit func(string) string
		msg  string
	}{
		{"empty", func(string) string { return "" }, "unexpected end of JSON"},
		{"truncated", func(s string) string { return s[:len(s)/2] }, "unexpected end of JSON"},
		{"not_json", func(string) string { return "\x00\x01garbage" }, "invalid character"},
		{"no_format_version", func(s string) string { return strings.Replace(s, `"format_version": 1,`, "", 1) }, "no format_version"},
		{"future_format_version", func(s string) string { return strings.Replace(s, `"format_version": 1`, `"format_version": 6`, 1) }, "format_version 6"},
		{"unknown_field", func(s string) string { return strings.Replace(s, `"version"`, `"colour": 1, "version"`, 1) }, "unknown field"},
		{"trailing_data", func(s string) string { return s + "{}" }, "after top-level value"},
		{"unknown_type", func(s string) string { return strings.Replace(s, `"type": "float64"`, `"type": "float128"`, 1) }, `unknown type "float128"`},
		{"bad_unit", func(s string) string { return strings.Replace(s, `"unit": "us"`, `"unit": "fortnight"`, 1) }, "unknown unit"},
		{"time_not_first", func(s string) string {
			return strings.Replace(s, `"name": "time"`, `"name": "tiempo"`, 1)
		}, `column 0 must be "time"`},
		{"time_wrong_type", func(s string) string {
			return strings.Replace(s, `"name": "time",
              "id": 0,
              "type": "timestamp",
              "unit": "ns"`, `"name": "time", "id": 0, "type": "int64"`, 1)
		}, `column "time" has type int64`},
		{"duplicate_column", func(s string) string { return strings.Replace(s, `"name": "usage"`, `"name": "host"`, 1) }, "duplicate name"},
		{"bad_database_name", func(s string) string { return strings.Replace(s, `"name": "logs"`, `"name": "lo gs"`, 1) }, "invalid database name"},
		{"reused_table_id", func(s string) string {
			return strings.Replace(s, "\"name\": \"mem\",\n          \"id\": 3", "\"name\": \"mem\",\n          \"id\": 1", 1)
		}, `table "mem": id 1 is zero or reused`},
		{"next_id_too_small", func(s string) string { return strings.Replace(s, `"next_table_id": 4`, `"next_table_id": 2`, 1) }, "not above the ids in use"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := valid(t)
			edited := tc.edit(v)
			if edited == v {
				t.Fatal("edit did not apply; fix the test")
			}
			path := filepath.Join(t.TempDir(), "catalog.json")
			if err := os.WriteFile(path, []byte(edited), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path, Limits{})
			checkErr(t, err, ErrCorrupt, "catalog: load "+path+": corrupt catalog file", tc.msg)
		})
	}
}

func TestLoadUnreadable(t *testing.T) {
	dir := t.TempDir() // a directory cannot be read as a file
	_, err := Load(dir, Limits{})
	if err == nil || !strings.Contains(err.Error(), dir) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("Load(dir) = %v; want an I/O error naming %s", err, dir)
	}
}

func TestSaveIsAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "catalog.json")
	c := sample(t)
	for i := 0; i < 3; i++ {
		write(t, c, "metrics", "t"+string(rune('a'+i)), cpu())
		if err := c.Save(path); err != nil {
			t.Fatal(err)
		}
		assertOnlyFiles(t, dir, "catalog.json")
	}
	// A failing Save (the target is a non-empty directory, so rename fails)
	// leaves neither a temp file nor a changed target.
	bad := filepath.Join(dir, "blocked")
	if err := os.MkdirAll(filepath.Join(bad, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := c.Save(bad)
	if err == nil || !strings.Contains(err.Error(), "catalog: save "+bad) {
		t.Fatalf("Save onto a directory = %v", err)
	}
	assertOnlyFiles(t, dir, "blocked", "catalog.json")
	// Saving into a missing directory fails and says where.
	missing := filepath.Join(dir, "nope", "catalog.json")
	if err := c.Save(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("Save into a missing directory = %v", err)
	}
}

func TestSaveSkipsUnchangedVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.json")
	c := sample(t)
	if err := c.Save(path); err != nil {
		t.Fatal(err)
	}
	// Replace the file behind the catalog's back: an unchanged version is
	// not rewritten, a changed one is.
	if err := os.WriteFile(path, []byte("marker"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Save(path); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); string(data) != "marker" {
		t.Fatal("unchanged version was rewritten")
	}
	write(t, c, "metrics", "disk", cpu())
	if err := c.Save(path); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(path, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := loaded.Table("metrics", "disk"); !ok || loaded.Version() != c.Version() {
		t.Fatal("changed version was not saved")
	}
}

// TestGoldenFile pins the file format: a change to it shows up as a diff
// of testdata/catalog_v1.golden.json. Regenerate with APRON_UPDATE_GOLDEN=1.
func TestGoldenFile(t *testing.T) {
	checkGolden(t, "catalog_v1.golden.json", sample(t).Snapshot())
}

// checkGolden compares the encoding of s with testdata/name (rewriting it
// with APRON_UPDATE_GOLDEN=1) and checks that the file still loads.
func checkGolden(t *testing.T, name string, s *Snapshot) {
	t.Helper()
	golden := filepath.Join("testdata", name)
	data, err := encodeSnapshot(s)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("APRON_UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(golden, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with APRON_UPDATE_GOLDEN=1 to create it)", err)
	}
	if !bytes.Equal(data, want) {
		t.Fatalf("encoding differs from %s; if intended, rerun with APRON_UPDATE_GOLDEN=1 and bump formatVersion if old servers would misread it\n%s", golden, data)
	}
	if _, err := Load(golden, Limits{}); err != nil {
		t.Fatal(err)
	}
}

// FuzzDecode: bytes from disk must never crash the server; whatever
// decodes must satisfy the invariants and re-encode.
func FuzzDecode(f *testing.F) {
	for _, name := range []string{"catalog_v1.golden.json", "catalog_v4.golden.json"} {
		if data, err := os.ReadFile(filepath.Join("testdata", name)); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"format_version":1,"version":0,"next_database_id":1,"next_table_id":1,"databases":[]}`))
	f.Add([]byte(`{"format_version":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := decodeSnapshot(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		for _, d := range s.Databases() {
			for _, tb := range d.TableList() {
				if len(tb.Columns) == 0 || !isTimeType(tb.Columns[0].Type) {
					t.Fatalf("table %s.%s decoded without time column", d.Name, tb.Name)
				}
			}
		}
		if _, err := encodeSnapshot(s); err != nil {
			t.Fatalf("decoded snapshot does not encode: %v", err)
		}
	})
}

func assertOnlyFiles(t *testing.T, dir string, want ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("directory holds %v, want %v", got, want)
	}
}
