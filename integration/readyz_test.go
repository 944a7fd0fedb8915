package integration

import (
	"encoding/json"
	"net/http"
	"regexp"
	"testing"
)

// TestReadyz: /readyz on the metrics listener says writes work and
// persistence keeps up.
func TestReadyz(t *testing.T) {
	s := startServer(t, t.TempDir(), "--metrics-addr", "127.0.0.1:0")
	m := regexp.MustCompile(`metrics_addr=(\S+)`).FindStringSubmatch(s.Stderr())
	if m == nil {
		t.Fatalf("no metrics address:\n%s", s.Stderr())
	}
	resp, err := http.Get("http://" + m[1] + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Ready   bool   `json:"ready"`
		WAL     string `json:"wal"`
		Persist string `json:"persist"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !r.Ready || r.WAL != "ok" || r.Persist != "ok" {
		t.Fatalf("/readyz: HTTP %d %+v", resp.StatusCode, r)
	}
}
