//go:build duckdb_arrow

package query

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/apron-db/apron/buffer"
)

// TestLatestManySeries checks the latest row per key, and equalities of
// the key, against DuckDB when the key has more values than a chunk
// shares a dictionary for (3,000 hosts: each chunk has a dictionary of
// its own, and chunks are checked by the partition's series ids,
// latest_series.go, and searched by them, scan_select.go): series that stop
// reporting, NULL keys, a series whose newest rows have no usage, two
// days (two spaces), the open chunk, key values the WHERE admits, and
// bounds on time at every chunk's edges. Over one day alone, the one
// space's memo holds the bounds (useSingle), also when persisted files
// are checked after the chunks.
func TestLatestManySeries(t *testing.T) {
	t.Run("two-days", func(t *testing.T) { latestManySeries(t, true, false) })
	t.Run("one-day", func(t *testing.T) { latestManySeries(t, false, false) })
	t.Run("one-day-files", func(t *testing.T) { latestManySeries(t, false, true) })
}

func latestManySeries(t *testing.T, dayBefore, files bool) {
	s, ref, rng, write := cpuStore(t, Config{}, 11)
	host := func(int) any { return fmt.Sprintf("s%04d", rng.IntN(3000)) }
	usage := func(_ int, h any) any {
		if h == "s0007" || rng.IntN(11) == 0 {
			return nil
		}
		return float64(rng.IntN(1000)) / 10
	}
	if dayBefore { // a partition, and a space, of its own
		write(base-int64(24*time.Hour), int64(time.Hour), 20_000, host, usage, false)
	}
	for j := range 10 {
		if files && j == 5 {
			s.roll()
			s.waitReleased(t, 1)
		}
		h := host
		switch j {
		case 0: // "gone-N" only here
			h = func(i int) any {
				if i%50 == 0 {
					return fmt.Sprintf("gone-%d", i%7)
				}
				return host(i)
			}
		case 4: // NULL keys only here
			h = func(i int) any {
				if i%30 == 0 {
					return nil
				}
				return host(i)
			}
		}
		u := usage
		if j < 8 { // s0007 has a usage in older rows only
			u = func(i int, h any) any {
				if h == "s0007" {
					return 1.5
				}
				return usage(i, h)
			}
		}
		write(base+int64(j)*int64(10*time.Minute), int64(10*time.Minute), 8_000, h, u, j >= 2)
	}

	// db.grow: a key of few values whose shared dictionary grows from
	// chunk to chunk (entries searched from where the last search of
	// the same dictionary stopped).
	ref.exec(`CREATE TABLE db.grow (time TIMESTAMP_NS, host VARCHAR)`)
	for j := range 6 {
		n := 9000
		ts, hosts := make([]any, n), make([]any, n)
		for i := range n {
			ts[i] = base + int64(j*n+i)*int64(time.Second)
			hosts[i] = fmt.Sprintf("g%d", rng.IntN(10*(j+1)))
		}
		rec := batch(s.mem, col{"time", tsNs, ts}, col{"host", arrow.BinaryTypes.String, hosts})
		ref.append("db", "grow", rec)
		s.write("db", "grow", rec)
	}

	v := s.wb.View()
	var chunks []buffer.Chunk
	for _, seg := range v.Buffered {
		chunks = append(chunks, v.Chunks(seg, "db", "cpu")...)
	}
	b := newLatestBounds(0)
	keys, has := latestKeysOf(chunks, "host")
	b.useSpaces(keys)
	if want := map[bool]int{true: 2, false: 1}[dayBefore]; len(b.spaces) != want {
		t.Errorf("chunks checked by %d series spaces, want %d (a day each)", len(b.spaces), want)
	}
	if b.useSingle(keys, has); (b.single != nil) == dayBefore {
		t.Errorf("one space taken as the bounds: %v", b.single != nil)
	}
	for _, c := range chunks {
		c.Rec.Release()
	}
	v.Release()

	queries := []string{
		"SELECT host, max(time) FROM db.cpu GROUP BY host",
		"SELECT host, arg_max(usage, time), max(time) FROM db.cpu GROUP BY host",
		"SELECT host, arg_max_null(usage, time) FROM db.cpu GROUP BY host",
		"SELECT host, max(time) FROM db.cpu GROUP BY host ORDER BY max(time) DESC LIMIT 5",
		"SELECT count(DISTINCT host) FROM db.cpu",
		"SELECT DISTINCT host FROM db.cpu",
		"SELECT host, max(time), arg_max(usage, time) FROM db.cpu WHERE host IN ('s0007', 'gone-3', 's2999', 'nope') GROUP BY host",
		"SELECT host, arg_max(usage, time) FROM db.cpu WHERE host = 's0007' GROUP BY host",
		"SELECT max(time), arg_max(usage, time) FROM db.cpu WHERE host = 's0100'",
		"SELECT region, max(time), arg_max(host, time) FROM db.cpu GROUP BY region",
		"SELECT host, region, max(time), arg_max(usage, time) FROM db.cpu GROUP BY host, region",
		// Equalities: the chunks' entries searched by series id
		// (scan_select.go).
		"SELECT * FROM db.cpu WHERE host = 's0007'",
		"SELECT time, usage FROM db.cpu WHERE host IN ('s0001', 'gone-2', 's2998', 'nope')",
		"SELECT * FROM db.cpu WHERE host = 'gone-3' AND region = 'r1'",
		"SELECT count(*) FROM db.cpu WHERE host = 's0100'",
		"SELECT count(*), max(usage) FROM db.cpu WHERE region = 'r2' AND host IN ('s0005', 's0006')",
		"SELECT * FROM db.cpu WHERE host = 's0042' ORDER BY time DESC LIMIT 3",
		"SELECT * FROM db.cpu WHERE host = 'nope'",
		"SELECT host, usage FROM db.cpu WHERE upper(host) = 'S0007' AND host = 's0007'",
		"SELECT * FROM db.grow WHERE host = 'g55'",
		"SELECT * FROM db.grow WHERE host IN ('g3', 'g47', 'g59')",
		"SELECT count(*) FROM db.grow WHERE host = 'g31'",
		"SELECT host, count(*), avg(epoch_ms(time)) FROM db.grow WHERE host IN ('g5', 'g25', 'g45') GROUP BY host",
		"SELECT host, count(*), min(usage) FROM db.cpu WHERE host IN ('s0005', 's0006', 'gone-4') GROUP BY host",
	}
	edges := timeEdges(s, "db", "cpu")
	for i, e := range edges {
		other := edges[(i*7+3)%len(edges)]
		lo, hi := min(e, other), max(e, other)
		queries = append(queries,
			fmt.Sprintf("SELECT host, max(time), arg_max(usage, time) FROM db.cpu WHERE time >= %s GROUP BY host", nsLiteral(e)),
			fmt.Sprintf("SELECT host, arg_max_null(usage, time) FROM db.cpu WHERE time > %s AND time <= %s GROUP BY host", nsLiteral(lo), nsLiteral(hi)),
			fmt.Sprintf("SELECT host, max(time) FROM db.cpu WHERE time < %s AND host IN ('s0001', 'gone-1') GROUP BY host", nsLiteral(e)),
			fmt.Sprintf("SELECT * FROM db.cpu WHERE time >= %s AND time <= %s AND host = 's0%03d'", nsLiteral(lo), nsLiteral(hi), i))
	}
	before := s.e.Stats()
	for _, q := range queries {
		equalRows(t, q, sorted(s.query(q, "")), sorted(ref.query(q)))
	}
	st := s.e.Stats()
	if st.LatestChunks == before.LatestChunks {
		t.Errorf("no chunk left out")
	}
	t.Logf("%d chunks left out over %d queries", st.LatestChunks-before.LatestChunks, len(queries))
}
