package catalog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLastValueCacheFormat: a definition survives a save and a load
// (format version 5, written only while one is defined), a version 4
// file that has one is corrupt, and DROP TABLE / DROP SCHEMA drop it.
func TestLastValueCacheFormat(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "catalog.json")
	c := New(DefaultLimits())
	write(t, c, "db", "cpu", cpu())
	if err := c.Save(path); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); strings.Contains(string(data), `"format_version": 5`) {
		t.Fatal("written as version 5 without a cache")
	}
	def, created, err := c.CreateLastValueCache(path, LastValueCache{Database: "db", Table: "cpu", Count: 4}, false)
	if err != nil || !created {
		t.Fatal(created, err)
	}
	data, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(data), `"format_version": 5`) || !strings.Contains(string(data), `"last_value_caches"`) {
		t.Fatalf("saved: %v\n%s", err, data)
	}
	l, err := Load(path, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	got, ok := l.Snapshot().LastValueCache("db", "cpu")
	if !ok || got.Name != def.Name || got.Count != 4 || strings.Join(got.Keys, ",") != strings.Join(def.Keys, ",") {
		t.Fatalf("loaded %+v, saved %+v", got, def)
	}
	old := strings.Replace(string(data), `"format_version": 5`, `"format_version": 4`, 1)
	if err := os.WriteFile(path+".v4", []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path+".v4", DefaultLimits()); err == nil || !strings.Contains(err.Error(), "last-value") {
		t.Fatalf("a version 4 file with a cache: %v", err)
	}
	if _, err := c.DropTable(path, "db", "cpu", 0, false); err != nil {
		t.Fatal(err)
	}
	if len(c.Snapshot().LastValueCaches()) != 0 {
		t.Fatal("DROP TABLE left the cache")
	}
	write(t, c, "db", "cpu", cpu())
	if _, _, err := c.CreateLastValueCache(path, LastValueCache{Database: "db", Table: "cpu"}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DropDatabase(path, "db", 0, true, false); err != nil {
		t.Fatal(err)
	}
	if len(c.Snapshot().LastValueCaches()) != 0 {
		t.Fatal("DROP SCHEMA left the cache")
	}
}
