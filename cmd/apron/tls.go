package main

// TLS for the Flight SQL (gRPC) listener and the HTTP metrics listener.
//
// The listeners are built once and never restarted. The *tls.Config each of
// them gets carries no certificate of its own: its GetConfigForClient hook
// loads the current tlsState from an atomic pointer at every handshake and
// returns that state's ready-made per-listener Config. reload reads the
// certificate chain, the private key and the client CA bundle again, builds
// a whole new tlsState and swaps the pointer; a failed reload leaves the old
// state in place. New connections see the new files, established ones keep
// the certificate they were made with.
//
// GetConfigForClient rather than GetCertificate alone, because ClientCAs (the
// mTLS trust anchors) is a plain Config field that no per-handshake callback
// replaces: rotating the client CA bundle needs a whole Config per
// handshake. It also swaps certificate and CA pool together, so a handshake
// never sees the certificate of one reload with the CA pool of another.
// gRPC's credentials.NewTLS wraps the hook and applies its defaults (h2 in
// NextProtos, TLS 1.2 at least, HTTP/2-safe cipher suites) to the Config it
// returns.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// tlsFlags are the serve flags of TLS; all empty means plaintext.
type tlsFlags struct {
	cert, key, clientCA, minVersion string
}

func (t *tlsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&t.cert, "tls-cert", "", "PEM certificate chain file, server certificate first; with --tls-key, serves TLS on --addr and --metrics-addr; reloaded on SIGHUP")
	fs.StringVar(&t.key, "tls-key", "", "PEM private key file (unencrypted) of --tls-cert; reloaded on SIGHUP")
	fs.StringVar(&t.clientCA, "tls-client-ca", "", "PEM bundle of CA certificates; when set, Flight SQL clients without a certificate signed by one of them are refused at the TLS handshake (mTLS; the metrics endpoint asks for none); reloaded on SIGHUP")
	fs.StringVar(&t.minVersion, "tls-min-version", "1.2", "oldest TLS version accepted: 1.2 or 1.3")
}

func (t *tlsFlags) enabled() bool { return t.cert != "" || t.key != "" }

// check validates the flags without reading files and returns the minimum
// TLS version.
func (t *tlsFlags) check() (uint16, error) {
	var v uint16
	switch t.minVersion {
	case "1.2":
		v = tls.VersionTLS12
	case "1.3":
		v = tls.VersionTLS13
	default:
		return 0, fmt.Errorf("--tls-min-version %q: want 1.2 or 1.3", t.minVersion)
	}
	switch {
	case t.cert != "" && t.key == "":
		return 0, errors.New("--tls-cert is set but --tls-key is not: give the private key of the certificate too")
	case t.key != "" && t.cert == "":
		return 0, errors.New("--tls-key is set but --tls-cert is not: give the certificate chain of the key too")
	case t.clientCA != "" && t.cert == "":
		return 0, errors.New("--tls-client-ca needs --tls-cert and --tls-key: client certificates are checked only on a TLS listener")
	}
	return v, nil
}

// validate checks the flags and, when TLS is on, that the files load, so
// that a mistake stops the server at startup rather than at the first
// handshake.
func (t *tlsFlags) validate() error {
	minVersion, err := t.check()
	if err != nil || !t.enabled() {
		return err
	}
	_, err = t.read(minVersion)
	return err
}

// load reads the files and returns the reloader serving them. Only call it
// when enabled.
func (t *tlsFlags) load(log *slog.Logger) (*tlsReloader, error) {
	minVersion, err := t.check()
	if err != nil {
		return nil, err
	}
	if !t.enabled() {
		return nil, errors.New("TLS is off: set --tls-cert and --tls-key")
	}
	s, err := t.read(minVersion)
	if err != nil {
		return nil, err
	}
	r := &tlsReloader{files: *t, minVersion: minVersion, log: log}
	r.state.Store(s)
	log.Info("TLS on", "cert", t.cert, "client_ca", t.clientCA, "min_version", t.minVersion,
		"subject", s.leaf.Subject.String(), "not_after", s.leaf.NotAfter)
	if time.Now().After(s.leaf.NotAfter) {
		log.Warn("TLS certificate has expired: clients will refuse it; replace the files and send SIGHUP",
			"cert", t.cert, "not_after", s.leaf.NotAfter)
	}
	return r, nil
}

// tlsState is one load of the files: immutable once built, swapped whole.
type tlsState struct {
	leaf       *x509.Certificate // the server certificate, for logs
	grpc, http *tls.Config       // what a handshake on either listener uses
}

// read loads the files into a new tlsState. Its errors name the flag and
// the file, never key material.
func (t *tlsFlags) read(minVersion uint16) (*tlsState, error) {
	certPEM, err := os.ReadFile(t.cert)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert: reading the certificate chain: %w (check the path and that apron may read it)", err)
	}
	keyPEM, err := os.ReadFile(t.key)
	if err != nil {
		return nil, fmt.Errorf("--tls-key: reading the private key: %w (check the path and that apron may read it)", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s, --tls-key %s: %w (want a PEM certificate chain, server certificate first, and its unencrypted PEM private key)", t.cert, t.key, err)
	}
	leaf := pair.Leaf // set by X509KeyPair unless GODEBUG=x509keypairleaf=0
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, fmt.Errorf("--tls-cert %s: %w", t.cert, err)
		}
	}
	var pool *x509.CertPool
	if t.clientCA != "" {
		caPEM, err := os.ReadFile(t.clientCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-client-ca: reading the CA bundle: %w (check the path and that apron may read it)", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, fmt.Errorf("--tls-client-ca %s: %w (want the PEM certificates of the CAs that sign client certificates)", t.clientCA, errNoCACert)
		}
	}
	s := &tlsState{
		leaf: leaf,
		// HTTP/1.1 is all Prometheus and pprof need; offering only it
		// keeps HTTP/2 out of the metrics server.
		http: &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: minVersion, NextProtos: []string{"http/1.1"}},
		grpc: &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: minVersion, NextProtos: []string{"h2"}},
	}
	if pool != nil {
		s.grpc.ClientAuth = tls.RequireAndVerifyClientCert
		s.grpc.ClientCAs = pool
	}
	return s, nil
}

var errNoCACert = errors.New("no PEM certificate in the file")

// tlsReloader serves the current tlsState to both listeners.
type tlsReloader struct {
	files      tlsFlags
	minVersion uint16
	log        *slog.Logger
	mu         sync.Mutex // one reload at a time, so the last one read wins
	state      atomic.Pointer[tlsState]
}

// grpcConfig is the Config of the gRPC listener:
// grpc.Creds(credentials.NewTLS(r.grpcConfig())).
func (r *tlsReloader) grpcConfig() *tls.Config {
	return r.config("h2", func(s *tlsState) *tls.Config { return s.grpc })
}

// httpConfig is the Config of the metrics listener:
// tls.NewListener(ln, r.httpConfig()). It never asks for a client
// certificate, so scrapers need only trust the CA.
func (r *tlsReloader) httpConfig() *tls.Config {
	return r.config("http/1.1", func(s *tlsState) *tls.Config { return s.http })
}

// config is the Config of a listener that offers proto in ALPN: each
// handshake gets of(the current tlsState).
func (r *tlsReloader) config(proto string, of func(*tlsState) *tls.Config) *tls.Config {
	return &tls.Config{
		MinVersion: r.minVersion,
		NextProtos: []string{proto},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return of(r.state.Load()), nil
		},
	}
}

// reload reads the files again and makes them current for new connections.
// On failure the old certificate and CA pool stay.
func (r *tlsReloader) reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, err := r.files.read(r.minVersion)
	if err != nil {
		return err
	}
	r.state.Store(s)
	return nil
}

// watchSIGHUP reloads on every SIGHUP until ctx is done or stop is called;
// stop also waits for the watcher to end. Without it a SIGHUP would kill
// the process, Go's default.
func (r *tlsReloader) watchSIGHUP(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				old := r.state.Load().leaf
				if err := r.reload(); err != nil {
					r.log.Error("TLS reload failed; still serving the old certificate", "err", err,
						"subject", old.Subject.String(), "not_after", old.NotAfter)
					continue
				}
				leaf := r.state.Load().leaf
				r.log.Info("TLS certificate reloaded", "subject", leaf.Subject.String(),
					"not_after", leaf.NotAfter, "serial", leaf.SerialNumber.Text(16))
			}
		}
	}()
	return func() { cancel(); <-done }
}
