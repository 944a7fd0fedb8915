//go:build duckdb_arrow

package query

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// TestNowBoundInGo: the bounds nowbounds.go evaluates give DuckDB's type
// and, within a second, its value; the forms it does not know are left
// to DuckDB; and queries with such bounds count what DuckDB counts
// without pruning.
func TestNowBoundInGo(t *testing.T) {
	v := newEnv(t, Config{})
	c, err := v.e.acquire(context.Background(), false, "")
	if err != nil {
		t.Fatal(err)
	}
	released := false
	t.Cleanup(func() { // before the engine closes, which waits for it
		if !released {
			v.e.release(c)
		}
	})
	parse := func(x string) any { t.Helper(); return selectExpr(t, c, x) }
	for _, x := range []string{
		"now()",
		"now() - INTERVAL 10 MINUTE",
		"now() - INTERVAL 1 DAY + INTERVAL 3 SECOND",
		"now() + INTERVAL 2 HOUR - INTERVAL 30 SECOND",
		"now() - INTERVAL 90 SECONDS",
		"now() - INTERVAL 2 WEEK",
		"now() - INTERVAL 250 MILLISECOND",
		"now() - INTERVAL 7 MICROSECOND",
		"now() - INTERVAL (3) MINUTE",
		"now() - to_hours(5)",
	} {
		goNs, goTyp, ok := nowBound(parse(x), time.Now())
		if !ok {
			t.Errorf("%s: not evaluated in Go", x)
			continue
		}
		rows, err := queryStrings(c.c, "SELECT typeof("+x+"), epoch_ns(CAST("+x+" AS TIMESTAMP_NS))")
		if err != nil {
			t.Fatal(err)
		}
		duckNs, _ := strconv.ParseInt(rows[0][1], 10, 64)
		if goTyp != rows[0][0] || goNs-duckNs > 1e9 || duckNs-goNs > 1e9 {
			t.Errorf("%s: Go %s %d, DuckDB %s %d", x, goTyp, goNs, rows[0][0], duckNs)
		}
	}
	for _, x := range []string{
		"now() - INTERVAL 1 MONTH",
		"now() - INTERVAL 1 YEAR",
		"now() - INTERVAL '10 minutes'",
		"current_timestamp - INTERVAL 1 MINUTE",
		"main.now() - INTERVAL 1 MINUTE",
		"date_trunc('hour', now())",
		"now() - to_minutes(CAST('1' AS BIGINT))",
		"now() - to_minutes(CAST(1.5 AS BIGINT))",
		"now() - INTERVAL (1.5) SECOND", // a DECIMAL constant
		"now() - to_seconds(1.5::DOUBLE)",
		"INTERVAL 1 MINUTE + now()",
		"now() - INTERVAL (random()) SECOND",
		"now() - to_seconds(2) * 2",
	} {
		if _, _, ok := nowBound(parse(x), time.Now()); ok {
			t.Errorf("%s: evaluated in Go", x)
		}
	}
	v.e.release(c)
	released = true

	// Rows 30 s apart around now - 10 minutes, none within 5 s of it.
	now := time.Now()
	var times, usage []any
	want := 0
	for i := range 40 {
		ts := now.Add(-20*time.Minute + time.Duration(i)*30*time.Second + 15*time.Second).UnixNano()
		times = append(times, ts)
		usage = append(usage, float64(i))
		if ts >= now.Add(-10*time.Minute).UnixNano() {
			want++
		}
	}
	v.write("db", "cpu", batch(v.mem, col{"time", tsNs, times}, col{"usage", arrow.PrimitiveTypes.Float64, usage}))
	before := v.e.Stats().BoundsInGo
	for _, q := range []string{
		"SELECT count(*) FROM db.cpu WHERE time >= now() - INTERVAL 10 MINUTE",
		"SELECT count(usage) FROM db.cpu WHERE time >= now() - INTERVAL 10 MINUTE AND time < now() + INTERVAL 1 HOUR",
		"SELECT count(*) FROM db.cpu WHERE now() - INTERVAL 600 SECOND <= time",
	} {
		equalRows(t, q, v.query(q, ""), []string{fmt.Sprint(want)})
		equalRows(t, q+" (DuckDB)", v.query(q+" AND usage IS NOT NULL OR false", ""), []string{fmt.Sprint(want)})
	}
	if v.e.Stats().BoundsInGo == before {
		t.Error("no bound evaluated in Go")
	}
}

// selectExpr is the expression x as json_serialize_sql parses it (the
// one item of SELECT x), parsed on c.
func selectExpr(t *testing.T, c *conn, x string) any {
	t.Helper()
	rows, err := queryStrings(c.c, "SELECT json_serialize_sql("+quoteLiteral("SELECT "+x)+")")
	if err != nil {
		t.Fatal(err)
	}
	var tree map[string]any
	if err := decodeJSON([]byte(rows[0][0]), &tree); err != nil || tree["error"] != false {
		t.Fatalf("%s: %v %s", x, err, rows[0][0])
	}
	return tree["statements"].([]any)[0].(map[string]any)["node"].(map[string]any)["select_list"].([]any)[0]
}
