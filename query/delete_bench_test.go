//go:build duckdb_arrow

package query

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkDeleteRewrite: DELETEs of a table of 30 days (APRON_BENCH_DAYS)
// × 24 one-hour persisted files (APRON_BENCH_FILE_ROWS rows each, default
// 7,000: 720 files, 5M rows; 70,000 makes the 50M), 100 hosts,
// and one more host, host-old, only in the first day's files. In this
// order, on the same table (each DELETE changes what the next one finds,
// so run it with -benchtime 1x): a host no file holds, host-old (24
// files of 720), one hour, and a host every file holds. It reports the
// rows deleted, the files rewritten, and the peak of the buffer's Arrow
// memory while the DELETE ran (the rows of two files at most).
func BenchmarkDeleteRewrite(b *testing.B) {
	s, day0, days := persistedMonth(b, func(h int, hosts []string) []string {
		if h < 24 {
			return append(append([]string(nil), hosts...), "host-old")
		}
		return hosts
	})

	hour := day0.Add(time.Duration(days*24/2) * time.Hour)
	cases := []struct{ name, cond string }{
		{"absent-host", "host = 'host-none'"},
		{"retired-host", "host = 'host-old'"},
		{"one-hour", fmt.Sprintf("time >= '%s'::TIMESTAMP_NS AND time < '%s'::TIMESTAMP_NS",
			hour.Format("2006-01-02 15:04:05"), hour.Add(time.Hour).Format("2006-01-02 15:04:05"))},
		{"host-everywhere", "host = 'host-007'"},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			want := s.query("SELECT count(*) FROM db.t WHERE "+c.cond, "")
			var peak, peakRSS atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				for {
					if n := int64(s.mem.CurrentAlloc()); n > peak.Load() {
						peak.Store(n)
					}
					if n := rss(); n > peakRSS.Load() {
						peakRSS.Store(n)
					}
					select {
					case <-stop:
						return
					case <-time.After(5 * time.Millisecond):
					}
				}
			})
			filesBefore := persistedSet(s)
			var deleted int64
			first := true
			for b.Loop() {
				n, err := s.update("DELETE FROM db.t WHERE " + c.cond)
				if err != nil {
					b.Fatal(err)
				}
				if first {
					deleted, first = n, false
				}
			}
			close(stop)
			wg.Wait()
			if got := fmt.Sprint(deleted); got != want[0] && "("+got+")" != want[0] {
				b.Fatalf("DELETE answered %d rows, the table held %s that matched", deleted, want[0])
			}
			b.ReportMetric(float64(deleted), "rows_deleted")
			after := persistedSet(s)
			rewritten, gone := 0, 0
			for p := range after {
				if !filesBefore[p] {
					rewritten++
				}
			}
			for p := range filesBefore {
				if !after[p] {
					gone++
				}
			}
			b.ReportMetric(float64(rewritten), "files_rewritten")
			b.ReportMetric(float64(gone-rewritten), "files_removed")
			b.ReportMetric(float64(peakRSS.Load())/(1<<20), "peak_rss_MiB")
			b.ReportMetric(float64(peak.Load())/(1<<20), "peak_arrow_MiB")
		})
	}
}

// persistedSet is the set of the paths of the persisted files.
func persistedSet(s *storeEnv) map[string]bool {
	out := map[string]bool{}
	for _, ps := range s.wb.Persisted() {
		for _, f := range ps.Files {
			out[f.Path] = true
		}
	}
	return out
}

// rss is the process's resident set in bytes (0 if unknown).
func rss() int64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	var size, res int64
	if _, err := fmt.Sscan(string(data), &size, &res); err != nil {
		return 0
	}
	return res * int64(os.Getpagesize())
}
