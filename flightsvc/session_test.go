package flightsvc

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight/session"
)

// TestSessionStorePerHost: a host that makes sessions in a loop pushes out
// only its own oldest ones, never another host's.
func TestSessionStorePerHost(t *testing.T) {
	st := newSessionStore(slog.New(slog.DiscardHandler))
	st.perHost, st.max = 3, 10
	newSession := func(id string) session.ServerSession {
		s, err := session.NewSessionFactory(func() string { return id }).CreateSession()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	st.keep(newSession("other"), "10.0.0.2", "")
	for i := range 20 {
		st.keep(newSession(fmt.Sprint("flood", i)), "10.0.0.1", "")
	}
	if _, ok := st.mu.m["other"]; !ok {
		t.Error("another host's session was pushed out")
	}
	n := 0
	for _, e := range st.mu.m {
		if e.host == "10.0.0.1" {
			n++
		}
	}
	if n != 3 {
		t.Errorf("the flooding host holds %d sessions, want its bound of 3", n)
	}
	for _, id := range []string{"flood17", "flood18", "flood19"} {
		if _, ok := st.mu.m[id]; !ok {
			t.Errorf("the flooding host's newest session %s is not kept", id)
		}
	}
}
