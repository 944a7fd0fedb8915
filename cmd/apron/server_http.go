package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/apron-db/apron/auth"
)

// serveMetrics opens --metrics-addr, before the WAL replays: /healthz,
// /readyz, /metrics (Prometheus) and /debug/pprof/ (Go profiles, as
// Prometheus serves them beside its metrics). It closes last, so that
// /readyz says "shutting_down" until the process exits.
func (s *server) serveMetrics(context.Context) error {
	if s.f.metricsAddr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", s.f.metricsAddr)
	if err != nil {
		return fmt.Errorf("--metrics-addr: %w", err)
	}
	s.metricsAddr = ln.Addr().String()
	if s.certs != nil {
		ln = tls.NewListener(ln, s.certs.httpConfig())
	}
	ready := readyz(s.life, nil)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	s.metricsAuth = &metricsGate{addr: s.f.metricsAddr, mux: mux,
		open: s.f.auth.withoutAuth || isLoopback(s.f.metricsAddr)}
	s.metricsAuth.ready.Store(&ready)
	mux.Handle("/readyz", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		(*s.metricsAuth.ready.Load()).ServeHTTP(w, r)
	}))
	root := http.NewServeMux()
	root.HandleFunc("/healthz", healthz)
	root.Handle("/", s.metricsAuth)
	srv := &http.Server{Handler: root, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("metrics server stopped", "err", err)
		}
	}()
	s.closers.add("the metrics listener", func() error {
		err := srv.Close()
		<-done
		return err
	})
	return nil
}

// metricsGate guards the metrics endpoints (but /healthz) with
// metricsAuth once the tokens are known, which is after the WAL replay.
// Until then, on an address where they need a token, /readyz answers
// with the startup state only (nothing a token would hide) and the rest
// 503; where they need none, everything answers from the start.
type metricsGate struct {
	addr  string
	mux   http.Handler
	open  bool // no token needed here: loopback, or --without-auth
	guard atomic.Pointer[http.Handler]
	// ready is the /readyz handler: the startup one, then one that also
	// probes the object store.
	ready atomic.Pointer[http.Handler]
}

// setVerifier puts authentication in front, once the catalog's tokens
// are loaded.
func (g *metricsGate) setVerifier(v *auth.Verifier) {
	if g == nil {
		return
	}
	h := metricsAuth(v, g.addr, g.mux)
	g.guard.Store(&h)
}

// setReadyz replaces the /readyz handler.
func (g *metricsGate) setReadyz(h http.Handler) {
	if g != nil {
		g.ready.Store(&h)
	}
}

func (g *metricsGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := g.guard.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	if g.open || r.URL.Path == "/readyz" {
		g.mux.ServeHTTP(w, r)
		return
	}
	w.Header().Set("Retry-After", "5")
	http.Error(w, "apron is starting (replaying the WAL): the metrics endpoints answer once it is ready; /readyz says how far it has come", http.StatusServiceUnavailable)
}
