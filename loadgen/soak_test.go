package loadgen

import (
	"strings"
	"testing"
	"time"
)

func TestParseMetrics(t *testing.T) {
	text := `# HELP go_goroutines Number of goroutines.
# TYPE go_goroutines gauge
go_goroutines 42
go_goroutines_extra 7
process_open_fds 12 1700000000000
apron_objstore_failures_total{class="unavailable",op="put"} 3
apron_objstore_failures_total{class="timeout",op="put"} 2
process_resident_memory_bytes 1.5e+08
`
	got, err := parseMetrics(strings.NewReader(text), []string{"go_goroutines", "process_open_fds",
		"apron_objstore_failures_total", "process_resident_memory_bytes", "absent"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"go_goroutines": 42, "process_open_fds": 12, "apron_objstore_failures_total": 5, "process_resident_memory_bytes": 1.5e8}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if _, err := parseMetrics(strings.NewReader("go_goroutines notanumber\n"), []string{"go_goroutines"}); err == nil {
		t.Error("a malformed value parsed")
	}
}

// series makes one sample a second of metric m with the values given,
// after warm samples of value 1000 (left out by a warm-up of that long).
func series(m string, warm int, vals ...float64) []SoakSample {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var out []SoakSample
	for i := 0; i < warm; i++ {
		out = append(out, SoakSample{At: t0.Add(time.Duration(i) * time.Second), Values: map[string]float64{m: 1000}})
	}
	for i, v := range vals {
		out = append(out, SoakSample{At: t0.Add(time.Duration(warm+i) * time.Second), Values: map[string]float64{m: v}})
	}
	return out
}

func TestJudgeGrowth(t *testing.T) {
	cfg := SoakConfig{Every: time.Second, Warmup: 3 * time.Second, Factor: 1.5, Series: []SoakSeries{{"m", 10}}}
	cases := []struct {
		name string
		vals []float64
		grew bool
	}{
		{"flat", []float64{100, 105, 98, 102, 101, 99, 103, 100, 104}, false},
		{"sawtooth (a buffer filling and persisting)", []float64{10, 90, 10, 95, 5, 92, 10, 88, 12}, false},
		{"within the slack", []float64{10, 10, 10, 12, 14, 16, 20, 24, 25}, false},
		{"a leak", []float64{100, 125, 150, 175, 200, 225, 250, 275, 300}, true},
		{"slower growth passes a short soak (a long one catches it)", []float64{100, 110, 120, 130, 140, 150, 160, 170, 180}, false},
		{"a leak past the factor and the slack", []float64{100, 100, 100, 120, 140, 150, 160, 161, 162}, true},
	}
	for _, c := range cases {
		// The warm-up's samples (1000, above everything) are left out:
		// were they judged, nothing would grow.
		gs, err := JudgeGrowth(series("m", 3, c.vals...), cfg)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(gs) != 1 || gs[0].Grew != c.grew || gs[0].Samples != len(c.vals) {
			t.Errorf("%s: %+v, want grew %v over %d samples", c.name, gs, c.grew, len(c.vals))
		}
	}
	if _, err := JudgeGrowth(series("m", 3, 1, 2, 3, 4, 5), cfg); err == nil || !strings.Contains(err.Error(), "run longer") {
		t.Errorf("5 samples after the warm-up: %v, want an error saying to run longer", err)
	}
	if _, err := JudgeGrowth(nil, cfg); err == nil {
		t.Error("no samples judged")
	}
	gs, err := JudgeGrowth(series("other", 0, 1, 1, 1, 1, 1, 1, 1, 1, 1), cfg)
	if err != nil || !gs[0].Missing || !gs[0].Grew {
		t.Errorf("a metric never exposed: %+v %v, want it missing (and failed)", gs, err)
	}
}

func TestSoakVerdict(t *testing.T) {
	ok := SoakVerdict{Before: TableCount{100, 100}, After: TableCount{1100, 1100}, Acked: 1000,
		Growth: []SoakGrowth{{Metric: "m", Samples: 9}}}
	if err := ok.Err(); err != nil {
		t.Errorf("a good soak: %v", err)
	}
	// Rows written but whose acknowledgement was lost are not a loss.
	extra := ok
	extra.After = TableCount{1150, 1150}
	if err := extra.Err(); err != nil {
		t.Errorf("more rows than acknowledged: %v", err)
	}
	lost := ok
	lost.After = TableCount{1090, 1090}
	if err := lost.Err(); err == nil || lost.Lost() != 10 || !strings.Contains(err.Error(), "10 acknowledged rows lost") {
		t.Errorf("10 rows lost: %v (Lost %d)", err, lost.Lost())
	}
	dup := ok
	dup.After = TableCount{1100, 1097}
	if err := dup.Err(); err == nil || dup.Duplicated() != 3 || !strings.Contains(err.Error(), "3 rows stored twice") {
		t.Errorf("3 duplicates: %v", err)
	}
	grew := ok
	grew.Growth = []SoakGrowth{{Metric: "go_goroutines", Samples: 9, First: 40, Last: 400, Limit: 124, Grew: true}}
	if err := grew.Err(); err == nil || !strings.Contains(err.Error(), "go_goroutines grew without bound") {
		t.Errorf("goroutines grew: %v", err)
	}
}

func TestSoakConfigValidate(t *testing.T) {
	good := DefaultSoakConfig()
	good.MetricsURL = "http://127.0.0.1:8083/metrics"
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []func(*SoakConfig){
		func(c *SoakConfig) { c.MetricsURL = "127.0.0.1:8083" },
		func(c *SoakConfig) { c.Every = 0 },
		func(c *SoakConfig) { c.Warmup = -time.Second },
		func(c *SoakConfig) { c.Factor = 0.5 },
		func(c *SoakConfig) { c.Series = nil },
	} {
		c := good
		bad(&c)
		if c.Validate() == nil {
			t.Errorf("%+v validated", c)
		}
	}
}
