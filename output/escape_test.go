package output

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTerminalSafe(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain", "plain"},
		{"a\nb\tc\rd", `a\nb\tc\rd`},
		{"\x1b[2J\x1b]0;pwned\a", `\e[2J\e]0;pwned\a`},
		{"\x00\x7f", `\x00\x7f`},
		{"\u009b31m", `\u009b31m`},
		{"abc\u202edcba", `abc\u202edcba`},
		{"line\u2028sep", `line\u2028sep`},
		{"bad\xff\xfeutf8", `bad\xff\xfeutf8`},
		{"日本 🚀 naïve", "日本 🚀 naïve"},
		{"👨‍👩‍👧", "👨‍👩‍👧"}, // a zero-width joiner is kept: it builds one emoji
	} {
		got, complete := appendTerminalSafe(nil, []byte(c.in), 1000)
		if string(got) != c.want || !complete {
			t.Errorf("appendTerminalSafe(%q) = %q, %v, want %q", c.in, got, complete, c.want)
		}
	}
	if _, complete := appendTerminalSafe(nil, []byte(strings.Repeat("x", 100)), 10); complete {
		t.Error("a cut value says it is complete")
	}
}

func TestCutToWidth(t *testing.T) {
	for _, c := range []struct {
		in    string
		width int
		more  bool
		want  string
		wantW int
	}{
		{"hello", 10, false, "hello", 5},
		{"hello", 5, false, "hello", 5},
		{"hello", 4, false, "hel…", 4},
		{"hello", 10, true, "hello…", 6},
		{"日本語", 6, false, "日本語", 6},
		{"日本語", 5, false, "日本…", 5},
		{"日本語", 4, false, "日…", 3}, // a wide character does not fit in the one column left
		{"🚀🚀🚀", 5, false, "🚀🚀…", 5},
		{"e\u0301e\u0301e\u0301", 2, false, "e\u0301…", 2}, // combining marks stay with their letter
		{"x", 0, false, "", 0},
	} {
		got, w := cutToWidth(c.in, c.width, maxCellBytes, c.more)
		if got != c.want || w != c.wantW {
			t.Errorf("cutToWidth(%q, %d) = %q (%d), want %q (%d)", c.in, c.width, got, w, c.want, c.wantW)
		}
		if w != displayWidth(got) {
			t.Errorf("cutToWidth(%q) says width %d, it is %d", c.in, w, displayWidth(got))
		}
	}
	// Zero-width characters cannot make a cell of any size.
	got, _ := cutToWidth(strings.Repeat("\u200b", 100000), 40, maxCellBytes, false)
	if len(got) > maxCellBytes {
		t.Errorf("cell of %d bytes", len(got))
	}
}

func TestJSONString(t *testing.T) {
	for _, in := range []string{"", "plain", "q\"b\\", "\x00\x1f\x7f\u0085\u2028\u202e", "bad\xffutf8", "日本🚀"} {
		out := appendJSONString(nil, in)
		var back string
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("%q: %v", out, err)
		}
		if want := strings.ToValidUTF8(in, "\ufffd"); back != want {
			t.Errorf("%q read back %q, want %q", out, back, want)
		}
		for _, r := range string(out) {
			if needsEscape(r) {
				t.Errorf("%q left %U unescaped", out, r)
			}
		}
	}
}

// FuzzTerminalCell: whatever the value, a table cell has no character a
// terminal acts on, is valid UTF-8, and is no wider than allowed.
func FuzzTerminalCell(f *testing.F) {
	for _, s := range []string{"", "x\x1b[31m", "日本語🚀", "\xff\u202e", strings.Repeat("e\u0301", 50)} {
		f.Add(s)
	}
	tw := &tableWriter{}
	f.Fuzz(func(t *testing.T, s string) {
		c := tw.makeCell([]byte(s))
		if !utf8.ValidString(c.text) {
			t.Fatalf("%q: cell %q is not UTF-8", s, c.text)
		}
		for _, r := range c.text {
			if needsEscape(r) {
				t.Fatalf("%q: cell %q has %U", s, c.text, r)
			}
		}
		if c.width > maxCellWidth || c.width != displayWidth(c.text) || len(c.text) > maxCellBytes+len(ellipsis) {
			t.Fatalf("%q: cell %q width %d (measured %d), %d bytes", s, c.text, c.width, displayWidth(c.text), len(c.text))
		}
		back := appendJSONString(nil, s)
		if !json.Valid(back) {
			t.Fatalf("%q: invalid JSON %q", s, back)
		}
	})
}
