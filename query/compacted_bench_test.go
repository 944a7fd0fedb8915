//go:build duckdb_arrow

package query

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
)

// BenchmarkCompactedQuery: 30 days (APRON_BENCH_DAYS) × 24 one-hour
// segments of one table (APRON_BENCH_FILE_ROWS rows each, default 7,000:
// 720 files, 5M rows; 100 hosts), persisted; a 30-day aggregate and a
// selective query (one host, one hour) through the engine and, as the
// reference, DuckDB's read_parquet over the same files, before and after
// compaction (one file a day). Targets (issue 13): after compaction, the
// aggregate within 1.3x of DuckDB over the compacted files, files opened
// ≤ 31, the selective query ≤ 50 ms.
func BenchmarkCompactedQuery(b *testing.B) {
	s, day0, days := persistedMonth(b, nil)

	paths := func() []string { return s.persistedPaths(b) }
	ref := newRefDB(b)
	hour := day0.Add(time.Duration(days*24/2) * time.Hour)
	queries := map[string]string{
		"aggregate": "SELECT host, count(*), avg(usage_user) FROM %s GROUP BY host",
		"selective": fmt.Sprintf("SELECT time, usage_user FROM %%s WHERE host = 'host-007' AND time >= '%s'::TIMESTAMP_NS AND time < '%s'::TIMESTAMP_NS",
			hour.Format("2006-01-02 15:04:05"), hour.Add(time.Hour).Format("2006-01-02 15:04:05")),
	}
	run := func(phase string) {
		ps := paths()
		refTable := "read_parquet([" + strings.Join(ps, ", ") + "])"
		for _, name := range []string{"aggregate", "selective"} {
			q := queries[name]
			equalRows(b, phase+" "+name, sorted(s.query(fmt.Sprintf(q, "db.t"), "")), sorted(ref.query(fmt.Sprintf(q, refTable))))
			for _, side := range []string{"apron", "duckdb"} {
				b.Run(phase+"/"+name+"/"+side, func(b *testing.B) {
					before := s.e.Stats()
					for b.Loop() {
						var r array.RecordReader
						var err error
						if side == "apron" {
							r, err = s.e.Query(context.Background(), fmt.Sprintf(q, "db.t"), "")
						} else {
							r, err = ref.reader(fmt.Sprintf(q, refTable))
						}
						drain(b, r, err)
					}
					if side == "apron" {
						st := s.e.Stats()
						b.ReportMetric(float64(st.FilesScanned-before.FilesScanned)/float64(b.N), "files_opened/op")
					}
					b.ReportMetric(float64(len(ps)), "files")
				})
			}
		}
	}
	run("before")
	start := time.Now()
	if err := s.wb.Compact(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Logf("compaction of %d files: %s", days*24, time.Since(start))
	run("after")
}

// persistedMonth persists APRON_BENCH_DAYS (30) days × 24 one-hour
// segments of db.t (APRON_BENCH_FILE_ROWS rows each, default 7,000) of
// 100 hosts, or of hostsAt(h, the 100) for hour h, to a local store. It
// returns the engine, the first day and the days.
func persistedMonth(b *testing.B, hostsAt func(h int, hosts []string) []string) (*storeEnv, time.Time, int) {
	days := envInt(b, "APRON_BENCH_DAYS", 30)
	per := envInt(b, "APRON_BENCH_FILE_ROWS", 7000)
	s, schema, hosts := usageStore(b)
	day0 := time.Unix(0, base).UTC().Truncate(24 * time.Hour)
	for h := range days * 24 {
		hs := hosts
		if hostsAt != nil {
			hs = hostsAt(h, hosts)
		}
		rec, _ := usageRecord(s.mem, schema, hs, day0.Add(time.Duration(h)*time.Hour).UnixNano(), int64(time.Hour)/int64(per), per, h*per)
		s.write("db", "t", rec) // releases rec
		s.roll()
	}
	s.waitReleased(b, days*24) // the buffer's loop rolls the last one over on the (fake) clock
	return s, day0, days
}
