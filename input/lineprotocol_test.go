package input

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestLineProtocol(t *testing.T) {
	data := "\xEF\xBB\xBF# a comment\n" + // 1
		"cpu,host=a,dc=x usage=1,n=2i,u=3u,ok=true,s=\"hi\" 1700000000000000000\n" + // 2
		"\n" + // 3
		"mem,host=b free=10i 1700000000000000001\n" + // 4
		"cpu,host=b usage=2.5,s=\"two\nlines \\\"q\\\"\" 1700000000000000002\n" + // 5-6
		"   cpu,host=c,new=y usage=-1,extra=false 1700000000000000003\r\n" + // 7
		"cpu\\ x,h\\,k=v\\ w f\\=1=1 1700000000000000004\n" // 8: escapes
	bs := mustRead(t, "d.lp", data, Options{Format: LineProtocol})
	var got []string
	for _, b := range bs {
		got = append(got, fmt.Sprintf("%s %s rows %d-%d lines %d-%d", b.Table, b.Schema, b.FirstRow, b.LastRow, b.FirstLine, b.LastLine))
		for _, r := range b.Rows {
			got = append(got, "\t"+r)
		}
	}
	const ts = "time:timestamp[ns, tz=UTC]"
	equalStrings(t, "batches", got, []string{
		"cpu " + ts + ",host:utf8,dc:utf8,usage:float64,n:int64,u:uint64,ok:bool,s:utf8,new:utf8,extra:bool rows 0-3 lines 2-7",
		"\t1700000000000000000 \"a\" \"x\" 1 2 3 true \"hi\" null null",
		"\t1700000000000000002 \"b\" null 2.5 null null null \"two\\nlines \\\"q\\\"\" null null",
		"\t1700000000000000003 \"c\" null -1 null null null null \"y\" false",
		"mem " + ts + ",host:utf8,free:int64 rows 1-1 lines 4-4",
		"\t1700000000000000001 \"b\" 10",
		"cpu x " + ts + ",h,k:utf8,f=1:float64 rows 4-4 lines 8-8",
		"\t1700000000000000004 \"v w\" 1",
	})
}

func TestLineProtocolBatchingAndSchemas(t *testing.T) {
	data := "m a=1 1\nm a=2 2\nm a=3,b=1 3\nm a=4 4\nm b=5 5\n"
	bs := mustRead(t, "d.lp", data, Options{Format: LineProtocol, BatchRows: 2, Precision: "s"})
	var got []string
	for _, b := range bs {
		got = append(got, fmt.Sprintf("%s rows %d-%d lines %d-%d: %s", b.Schema, b.FirstRow, b.LastRow, b.FirstLine, b.LastLine, strings.Join(b.Rows, "; ")))
	}
	const ts = "time:timestamp[ns, tz=UTC]"
	equalStrings(t, "batches", got, []string{
		ts + ",a:float64 rows 0-1 lines 1-2: 1000000000 1; 2000000000 2",
		ts + ",a:float64,b:float64 rows 2-3 lines 3-4: 3000000000 3 1; 4000000000 4 null",
		ts + ",b:float64 rows 4-4 lines 5-5: 5000000000 5",
	})
}

func TestLineProtocolPrecisionAndNow(t *testing.T) {
	for _, tc := range []struct {
		prec string
		want int64
	}{{"", 1700000000}, {"ns", 1700000000}, {"us", 1700000000e3}, {"ms", 1700000000e6}, {"s", 1700000000e9}} {
		bs := mustRead(t, "p.lp", "m v=1 1700000000\n", Options{Format: LineProtocol, Precision: tc.prec})
		equalStrings(t, "precision "+tc.prec, allRows(bs), []string{fmt.Sprint(tc.want, " 1")})
	}
	before := time.Now().UnixNano()
	bs := mustRead(t, "p.lp", "m v=1\n", Options{Format: LineProtocol})
	after := time.Now().UnixNano()
	ns, err := strconv.ParseInt(strings.Fields(bs[0].Rows[0])[0], 10, 64)
	if err != nil || ns < before || ns > after {
		t.Errorf("time of a line without timestamp: %s, want between %d and %d", bs[0].Rows[0], before, after)
	}
	if _, err := Open("p.lp", strings.NewReader(""), 0, Options{Format: LineProtocol, Precision: "h"}); !errors.Is(err, ErrSchema) {
		t.Errorf("precision h: %v", err)
	}
}

func TestLineProtocolErrors(t *testing.T) {
	for _, tc := range []struct {
		name, data, want string
		is               error
	}{
		{"field_type_change", "cpu usage=1 1\n\ncpu usage=1i 2\n", `d.lp:3: measurement "cpu": type mismatch: field "usage" is an int64 (1i) here but was a float64 (1.5) on an earlier line (a field keeps its first type)`, ErrType},
		{"type_change_across_batches", "cpu v=\"a\"\ncpu v=\"b\"\ncpu v=true\n", `d.lp:3: measurement "cpu": type mismatch: field "v" is a bool (true) here but was a string ("a") on an earlier line (a field keeps its first type)`, ErrType},
		{"tag_then_field", "cpu,k=a v=1\ncpu k=1\n", `d.lp:2: measurement "cpu": schema error: "k" is a field here but was a tag on an earlier line`, ErrSchema},
		{"time_tag", "cpu,time=a v=1\n", `d.lp:1: measurement "cpu": schema error: a tag named "time" would clash with the time column`, ErrSchema},
		{"duplicate_field", "cpu v=1,v=2\n", `d.lp:1: measurement "cpu": syntax error: field "v" appears twice`, ErrSyntax},
		{"no_fields", "cpu v=1\ncpu,host=a\n", `d.lp:2: measurement "cpu": syntax error: byte 11: expected tag key or field but found '\n' instead`, ErrSyntax},
		{"bad_value", "cpu v=1\ncpu v=abc 1\n", `d.lp:2: measurement "cpu": syntax error: byte 7: field value has unrecognized type`, ErrSyntax},
		{"bad_timestamp", "cpu v=1 12x\n", `d.lp:1: measurement "cpu": syntax error: byte 9: invalid timestamp ("12x")`, ErrSyntax},
		{"after_string_newline", "cpu s=\"a\nb\"\ncpu v=1 x\n", `d.lp:3: measurement "cpu": syntax error: byte 9: invalid timestamp ("x")`, ErrSyntax},
		{"timestamp_overflow", "cpu v=1 9223372036854775807\n", `d.lp:1: measurement "cpu": timestamp 9223372036854775807: outside the range of timestamp[ns], 1677-09-21 to 2262-04-11`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prec := ""
			if tc.name == "timestamp_overflow" {
				prec = "s"
			}
			_, err := readString(t, "d.lp", tc.data, Options{Format: LineProtocol, BatchRows: 2, Precision: prec})
			wantError(t, err, tc.want)
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error is not %v", tc.is)
			}
		})
	}
}

// TestLPScan checks the entry scanner against the decoder's view of where
// entries end, line by line.
func TestLPScan(t *testing.T) {
	data := []byte("a,t=x f=1 1\n# c\n  \nb s=\"x\ny\\\"\nz\" 2\nc\\ d,e\\ f=g h=\"\\\\\"\nlast v=1")
	end, lines, entries := lpScanBlock(data, 1, false, nil)
	if want := len(data) - len("last v=1"); end != want || lines != 7 {
		t.Errorf("not at EOF: end %d lines %d, want %d 7", end, lines, want)
	}
	got := fmt.Sprint(entries)
	if want := "[{1 1} {4 6} {7 7}]"; got != want {
		t.Errorf("entries %s, want %s", got, want)
	}
	_, _, entries = lpScanBlock(data, 1, true, nil)
	if got, want := fmt.Sprint(entries), "[{1 1} {4 6} {7 7} {8 8}]"; got != want {
		t.Errorf("at EOF: entries %s, want %s", got, want)
	}
}
