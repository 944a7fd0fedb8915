package catalog

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseRetention(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"30d": 30 * 24 * time.Hour, "2w": 14 * 24 * time.Hour, "36h": 36 * time.Hour, "90m": 90 * time.Minute,
		"1.5d": 36 * time.Hour, "none": RetentionNone, "Infinite": RetentionNone, "default": 0, "": 0,
	} {
		got, err := ParseRetention(in)
		if err != nil || got != want {
			t.Errorf("ParseRetention(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"3s", "soon", "d", "-1d", "1x", "0"} {
		if _, err := ParseRetention(in); !errors.Is(err, ErrInvalidSchema) {
			t.Errorf("ParseRetention(%q): %v, want an error", in, err)
		}
	}
	for r, want := range map[time.Duration]string{0: "default", RetentionNone: "none", 30 * 24 * time.Hour: "30d", 36 * time.Hour: "36h0m0s"} {
		if got := FormatRetention(r); got != want {
			t.Errorf("FormatRetention(%v) = %q, want %q", r, got, want)
		}
		if back, err := ParseRetention(FormatRetention(r)); err != nil || back != r {
			t.Errorf("FormatRetention(%v) does not parse back: %v %v", r, back, err)
		}
	}
}

func TestSetRetention(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.json")
	c := New(Limits{MaxDatabases: 10, MaxTables: 10, MaxColumnsPerTable: 10})
	write(t, c, "db", "cpu", cpu())
	if err := c.Save(path); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetRetention(path, "nope", time.Hour); !errors.Is(err, ErrDatabaseNotFound) {
		t.Fatalf("unknown database: %v", err)
	}
	if _, err := c.SetRetention(path, "db", time.Second); !errors.Is(err, ErrInvalidSchema) {
		t.Fatalf("too short: %v", err)
	}
	if changed, err := c.SetRetention(path, "db", 30*24*time.Hour); err != nil || !changed {
		t.Fatalf("SetRetention: %v %v", changed, err)
	}
	if changed, err := c.SetRetention(path, "db", 30*24*time.Hour); err != nil || changed {
		t.Fatalf("same again: %v %v", changed, err)
	}
	// Kept by later changes of the database's tables.
	write(t, c, "db", "mem", cpu())
	if err := c.Save(path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"format_version": 3`) || !strings.Contains(string(data), `"retention_ns": 2592000000000000`) {
		t.Fatalf("saved catalog:\n%s", data)
	}
	loaded, err := Load(path, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := loaded.Database("db"); d.Retention != 30*24*time.Hour || len(d.Tables) != 2 {
		t.Fatalf("loaded retention %v, %d tables", d.Retention, len(d.Tables))
	}
	if _, err := c.SetRetention(path, "db", 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Save(path); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); !strings.Contains(string(data), `"format_version": 1`) {
		t.Fatalf("a catalog with nothing of version 3 left is written as version 1:\n%s", data)
	}
}
