package main

import (
	"os"
	"runtime/debug"
	"testing"

	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/query"
)

func TestGCMemoryLimitFlag(t *testing.T) {
	for _, c := range []struct {
		in   string
		want gcMemoryLimit
	}{
		{"auto", gcMemoryLimit{auto: true}},
		{"AUTO", gcMemoryLimit{auto: true}},
		{"off", gcMemoryLimit{}},
		{"0", gcMemoryLimit{}},
		{"3GiB", gcMemoryLimit{bytes: 3 << 30}},
		{"512MiB", gcMemoryLimit{bytes: 512 << 20}},
	} {
		var g gcMemoryLimit
		if err := g.Set(c.in); err != nil || g != c.want {
			t.Errorf("Set(%q) = %+v, %v; want %+v", c.in, g, err, c.want)
		}
	}
	for _, bad := range []string{"", "lots", "-1GiB", "1MiB", "12"} {
		var g gcMemoryLimit
		if err := g.Set(bad); err == nil {
			t.Errorf("Set(%q) = %+v, want an error", bad, g)
		}
	}
}

func TestSetMemoryLimit(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "") // unset below; t.Setenv restores it
	old := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(old)
	if got := setMemoryLimit(gcMemoryLimit{auto: true}, true, 2<<30); got != "3221225472" {
		t.Errorf("auto for a 2 GiB buffer: %s, want 3221225472 (3 GiB)", got)
	}
	if got := debug.SetMemoryLimit(-1); got != buffer.DefaultGCMemoryLimit(2<<30) {
		t.Errorf("limit in force %d, want %d", got, buffer.DefaultGCMemoryLimit(2<<30))
	}
	if got := setMemoryLimit(gcMemoryLimit{bytes: 1 << 30}, true, 2<<30); got != "1073741824" || debug.SetMemoryLimit(-1) != 1<<30 {
		t.Errorf("1 GiB: %s", got)
	}
	if got := setMemoryLimit(gcMemoryLimit{}, true, 2<<30); got != "off" {
		t.Errorf("off: %s", got)
	}
	t.Setenv("GOMEMLIMIT", "5GiB")
	if got := setMemoryLimit(gcMemoryLimit{auto: true}, false, 2<<30); got != "5GiB" {
		t.Errorf("with GOMEMLIMIT and no flag: %s, want the environment's 5GiB", got)
	}
}

// TestPageCacheSizeFlag: --page-cache-size and APRON_PAGE_CACHE_SIZE reach
// the query engine; 0 turns the cache off (the engine's 0 is its default).
func TestPageCacheSizeFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  string
		want int64
	}{
		{nil, "", query.DefaultPageCacheSize},
		{[]string{"--page-cache-size", "256MiB"}, "", 256 << 20},
		{[]string{"--page-cache-size", "0"}, "", -1},
		{nil, "1GiB", 1 << 30},
		{[]string{"--page-cache-size", "8MiB"}, "1GiB", 8 << 20},
	} {
		t.Setenv("APRON_PAGE_CACHE_SIZE", c.env)
		if c.env == "" {
			os.Unsetenv("APRON_PAGE_CACHE_SIZE")
		}
		args := append([]string{"--without-auth", "--data-dir", t.TempDir()}, c.args...)
		f, err := parseServeFlags(args)
		if err != nil {
			t.Fatalf("%q, env %q: %v", c.args, c.env, err)
		}
		if f.queryCfg.PageCacheSize != c.want {
			t.Fatalf("%q, env %q: page cache size %d, want %d", c.args, c.env, f.queryCfg.PageCacheSize, c.want)
		}
	}
}
