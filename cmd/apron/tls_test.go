package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/apron-db/apron/internal/testpki"
)

// tlsFixture is a CA with a server certificate and a client certificate,
// written to a temp dir.
type tlsFixture struct{ *testpki.PKI }

func newTLSFixture(t *testing.T) *tlsFixture {
	t.Helper()
	return &tlsFixture{testpki.New(t, t.TempDir(), "apron test")}
}

func (f *tlsFixture) flags(mTLS bool) tlsFlags {
	tf := tlsFlags{cert: f.ServerCertFile, key: f.ServerKeyFile, minVersion: "1.2"}
	if mTLS {
		tf.clientCA = f.CAFile
	}
	return tf
}

func (f *tlsFixture) load(t *testing.T, tf tlsFlags) *tlsReloader {
	t.Helper()
	r, err := tf.load(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// clientConfig trusts the fixture's CA and offers h2 as gRPC clients do.
func (f *tlsFixture) clientConfig(certs ...tls.Certificate) *tls.Config {
	return &tls.Config{RootCAs: f.CAPool(), NextProtos: []string{"h2"}, Certificates: certs}
}

// serveTLS accepts TLS connections with cfg on a loopback port. Each gets a
// handshake and, if that succeeds, one byte: in TLS 1.3 the client's side
// of the handshake ends before the server checks the client certificate,
// so a refused client learns it on its first read.
func serveTLS(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tl := tls.NewListener(ln, cfg)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				if c.(*tls.Conn).Handshake() == nil {
					_, _ = c.Write([]byte{1})
				}
			}()
		}
	}()
	t.Cleanup(func() { tl.Close(); wg.Wait() })
	return ln.Addr().String()
}

// handshake connects to a serveTLS address and reads its byte.
func handshake(addr string, cfg *tls.Config) (tls.ConnectionState, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return tls.ConnectionState{}, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = io.ReadFull(c, make([]byte, 1))
	return c.ConnectionState(), err
}

func mustHandshake(t *testing.T, addr string, cfg *tls.Config) tls.ConnectionState {
	t.Helper()
	st, err := handshake(addr, cfg)
	if err != nil {
		t.Fatalf("handshake with %s: %v", addr, err)
	}
	return st
}

func TestTLSFlagsValidate(t *testing.T) {
	f := newTLSFixture(t)
	garbage := testpki.WriteFile(t, f.Dir, "garbage.pem", []byte("not PEM at all\n"))
	missing := filepath.Join(f.Dir, "missing.pem")
	otherKeyFile := testpki.WriteFile(t, f.Dir, "other-key.pem", f.CA.Server(t, "other").KeyPEM)
	for _, tc := range []struct {
		name  string
		flags tlsFlags
		want  []string // in the error; none: no error
		is    error
	}{
		{name: "off", flags: tlsFlags{minVersion: "1.2"}},
		{name: "ok", flags: f.flags(false)},
		{name: "ok mTLS 1.3", flags: tlsFlags{cert: f.ServerCertFile, key: f.ServerKeyFile, clientCA: f.CAFile, minVersion: "1.3"}},
		{name: "cert without key", flags: tlsFlags{cert: f.ServerCertFile, minVersion: "1.2"}, want: []string{"--tls-cert", "--tls-key"}},
		{name: "key without cert", flags: tlsFlags{key: f.ServerKeyFile, minVersion: "1.2"}, want: []string{"--tls-key", "--tls-cert"}},
		{name: "client CA without cert", flags: tlsFlags{clientCA: f.CAFile, minVersion: "1.2"}, want: []string{"--tls-client-ca", "--tls-cert"}},
		{name: "missing cert", flags: tlsFlags{cert: missing, key: f.ServerKeyFile, minVersion: "1.2"}, want: []string{"--tls-cert", missing}, is: fs.ErrNotExist},
		{name: "missing key", flags: tlsFlags{cert: f.ServerCertFile, key: missing, minVersion: "1.2"}, want: []string{"--tls-key", missing}, is: fs.ErrNotExist},
		{name: "missing client CA", flags: tlsFlags{cert: f.ServerCertFile, key: f.ServerKeyFile, clientCA: missing, minVersion: "1.2"}, want: []string{"--tls-client-ca", missing}, is: fs.ErrNotExist},
		{name: "garbage cert", flags: tlsFlags{cert: garbage, key: f.ServerKeyFile, minVersion: "1.2"}, want: []string{"--tls-cert " + garbage, "PEM"}},
		{name: "garbage key", flags: tlsFlags{cert: f.ServerCertFile, key: garbage, minVersion: "1.2"}, want: []string{"--tls-key " + garbage, "PEM"}},
		{name: "key of another cert", flags: tlsFlags{cert: f.ServerCertFile, key: otherKeyFile, minVersion: "1.2"}, want: []string{"--tls-key " + otherKeyFile, "does not match"}},
		{name: "garbage client CA", flags: tlsFlags{cert: f.ServerCertFile, key: f.ServerKeyFile, clientCA: garbage, minVersion: "1.2"}, want: []string{"--tls-client-ca " + garbage}, is: errNoCACert},
		{name: "min version 1.1", flags: tlsFlags{cert: f.ServerCertFile, key: f.ServerKeyFile, minVersion: "1.1"}, want: []string{"--tls-min-version", `"1.1"`, "1.2 or 1.3"}},
		{name: "min version empty", flags: tlsFlags{minVersion: ""}, want: []string{"--tls-min-version"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.flags.validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("validate: no error, want one with %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %q does not wrap %v", err, tc.is)
			}
			if _, lerr := tc.flags.load(slog.New(slog.DiscardHandler)); lerr == nil {
				t.Errorf("load accepted what validate refused")
			}
		})
	}
}

func TestTLSFlagsRegister(t *testing.T) {
	f := newTLSFixture(t)
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	var tf tlsFlags
	tf.register(fs)
	if tf.minVersion != "1.2" {
		t.Errorf("default --tls-min-version %q, want 1.2", tf.minVersion)
	}
	for _, name := range []string{"tls-cert", "tls-key", "tls-client-ca"} {
		if u := fs.Lookup(name).Usage; !strings.Contains(u, "SIGHUP") {
			t.Errorf("--%s help %q does not mention SIGHUP", name, u)
		}
	}
	t.Setenv("APRON_TLS_CERT", f.ServerCertFile)
	t.Setenv("APRON_TLS_MIN_VERSION", "1.3")
	if err := fs.Parse([]string{"--tls-key", f.ServerKeyFile}); err != nil {
		t.Fatal(err)
	}
	if err := applyEnv(fs); err != nil {
		t.Fatal(err)
	}
	if !tf.enabled() || tf.cert != f.ServerCertFile || tf.key != f.ServerKeyFile || tf.minVersion != "1.3" {
		t.Fatalf("flags %+v", tf)
	}
	if err := tf.validate(); err != nil {
		t.Fatal(err)
	}
}

func TestTLSHandshake(t *testing.T) {
	f := newTLSFixture(t)
	r := f.load(t, f.flags(false))
	addr := serveTLS(t, r.grpcConfig())

	st := mustHandshake(t, addr, f.clientConfig())
	if st.NegotiatedProtocol != "h2" {
		t.Errorf("ALPN %q, want h2", st.NegotiatedProtocol)
	}
	if cn := st.PeerCertificates[0].Subject.CommonName; cn != "apron test server" {
		t.Errorf("server certificate %q", cn)
	}
	byName := f.clientConfig()
	byName.ServerName = "localhost"
	mustHandshake(t, addr, byName)

	// A client that does not trust the CA refuses the server.
	_, err := handshake(addr, &tls.Config{NextProtos: []string{"h2"}, RootCAs: testpki.NewCA(t, "other CA").Pool()})
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Errorf("client trusting another CA: %v, want an unknown authority error", err)
	}

	httpAddr := serveTLS(t, r.httpConfig())
	st = mustHandshake(t, httpAddr, &tls.Config{RootCAs: f.CAPool(), NextProtos: []string{"h2", "http/1.1"}})
	if st.NegotiatedProtocol != "http/1.1" {
		t.Errorf("metrics ALPN %q, want http/1.1", st.NegotiatedProtocol)
	}
}

func TestTLSClientCA(t *testing.T) {
	f := newTLSFixture(t)
	r := f.load(t, f.flags(true))
	addr := serveTLS(t, r.grpcConfig())
	stranger := testpki.NewCA(t, "other CA").Client(t, "stranger").TLS(t)
	for _, maxVersion := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		t.Run(tls.VersionName(maxVersion), func(t *testing.T) {
			cfg := func(certs ...tls.Certificate) *tls.Config {
				c := f.clientConfig(certs...)
				c.MaxVersion = maxVersion
				return c
			}
			if _, err := handshake(addr, cfg()); err == nil {
				t.Error("client without a certificate was let in")
			}
			if _, err := handshake(addr, cfg(stranger)); err == nil {
				t.Error("client with a certificate of another CA was let in")
			}
			if st := mustHandshake(t, addr, cfg(f.Client)); st.Version != maxVersion {
				t.Errorf("version %s", tls.VersionName(st.Version))
			}
		})
	}
	// The metrics listener asks for no client certificate.
	mustHandshake(t, serveTLS(t, r.httpConfig()), &tls.Config{RootCAs: f.CAPool()})
}

func TestTLSMinVersion13(t *testing.T) {
	f := newTLSFixture(t)
	tf := f.flags(false)
	tf.minVersion = "1.3"
	r := f.load(t, tf)
	for name, cfg := range map[string]*tls.Config{"grpc": r.grpcConfig(), "http": r.httpConfig()} {
		t.Run(name, func(t *testing.T) {
			addr := serveTLS(t, cfg)
			old := &tls.Config{RootCAs: f.CAPool(), MaxVersion: tls.VersionTLS12}
			if _, err := handshake(addr, old); err == nil {
				t.Error("a TLS 1.2 client was let in")
			}
			if st := mustHandshake(t, addr, &tls.Config{RootCAs: f.CAPool()}); st.Version != tls.VersionTLS13 {
				t.Errorf("version %s", tls.VersionName(st.Version))
			}
		})
	}
}

func TestTLSReload(t *testing.T) {
	f := newTLSFixture(t)
	r := f.load(t, f.flags(false))
	addr := serveTLS(t, r.grpcConfig())
	httpAddr := serveTLS(t, r.httpConfig())
	first := mustHandshake(t, addr, f.clientConfig()).PeerCertificates[0]

	serial := f.RotateServer(t, "apron test server 2").SerialNumber
	if err := r.reload(); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{addr, httpAddr} {
		got := mustHandshake(t, a, &tls.Config{RootCAs: f.CAPool()}).PeerCertificates[0]
		if got.SerialNumber.Cmp(serial) != 0 || got.Subject.CommonName != "apron test server 2" {
			t.Errorf("%s after reload: serial %x %q, want %x (before: %x)", a, got.SerialNumber, got.Subject.CommonName, serial, first.SerialNumber)
		}
	}

	// A failed reload keeps the certificate it had.
	testpki.WriteFile(t, f.Dir, "server.pem", []byte("-----BEGIN CERTIFICATE-----\ngarbage\n-----END CERTIFICATE-----\n"))
	err := r.reload()
	if err == nil || !strings.Contains(err.Error(), "--tls-cert") {
		t.Fatalf("reload of a garbage certificate: %v", err)
	}
	got := mustHandshake(t, addr, f.clientConfig()).PeerCertificates[0]
	if got.SerialNumber.Cmp(serial) != 0 {
		t.Errorf("after a failed reload: serial %x, want %x", got.SerialNumber, serial)
	}
}

func TestTLSReloadClientCA(t *testing.T) {
	f := newTLSFixture(t)
	r := f.load(t, f.flags(true))
	addr := serveTLS(t, r.grpcConfig())
	mustHandshake(t, addr, f.clientConfig(f.Client))

	ca2 := testpki.NewCA(t, "apron test CA 2")
	testpki.WriteFile(t, f.Dir, "ca.pem", ca2.PEM)
	if err := r.reload(); err != nil {
		t.Fatal(err)
	}
	if _, err := handshake(addr, f.clientConfig(f.Client)); err == nil {
		t.Error("client of the replaced CA was let in")
	}
	mustHandshake(t, addr, f.clientConfig(ca2.Client(t, "client 2").TLS(t)))
}

// syncBuffer is a log sink the watcher goroutine and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestTLSReloadOnSIGHUP(t *testing.T) {
	f := newTLSFixture(t)
	var logs syncBuffer
	tf := f.flags(false)
	r, err := tf.load(slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	addr := serveTLS(t, r.grpcConfig())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := r.watchSIGHUP(ctx)
	defer stop()

	waitLog := func(want string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), want); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in the log:\n%s", want, logs.String())
			}
		}
	}
	serial := f.RotateServer(t, "apron test server 2").SerialNumber
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog("TLS certificate reloaded")
	if got := mustHandshake(t, addr, f.clientConfig()).PeerCertificates[0]; got.SerialNumber.Cmp(serial) != 0 {
		t.Errorf("after SIGHUP: serial %x, want %x", got.SerialNumber, serial)
	}
	if !strings.Contains(logs.String(), "CN=apron test server 2") {
		t.Errorf("reload log lacks the subject:\n%s", logs.String())
	}

	testpki.WriteFile(t, f.Dir, "server-key.pem", []byte("garbage"))
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog("level=ERROR msg=\"TLS reload failed")
	if got := mustHandshake(t, addr, f.clientConfig()).PeerCertificates[0]; got.SerialNumber.Cmp(serial) != 0 {
		t.Errorf("after a failed SIGHUP reload: serial %x, want %x", got.SerialNumber, serial)
	}
	if strings.Contains(logs.String(), "PRIVATE KEY") {
		t.Errorf("key material in the log:\n%s", logs.String())
	}
	// Cancelling the context ends the watcher; stop then returns at once.
	cancel()
	stop()
}

// TestTLSGRPCAndHTTP runs the configs the way serve wires them: a gRPC
// server with credentials.NewTLS and an http.Server on tls.NewListener.
func TestTLSGRPCAndHTTP(t *testing.T) {
	f := newTLSFixture(t)
	r := f.load(t, f.flags(true))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.Creds(credentials.NewTLS(r.grpcConfig())))
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go func() { _ = gs.Serve(ln) }()
	defer gs.Stop()

	check := func(cfg *tls.Config) error {
		cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			return err
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	if err := check(&tls.Config{RootCAs: f.CAPool(), Certificates: []tls.Certificate{f.Client}}); err != nil {
		t.Fatalf("gRPC with the client certificate: %v", err)
	}
	if err := check(&tls.Config{RootCAs: f.CAPool()}); err == nil {
		t.Error("gRPC without a client certificate was let in")
	}

	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })}
	go func() { _ = hs.Serve(tls.NewListener(hl, r.httpConfig())) }()
	defer hs.Close()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: f.CAPool()}}, Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("https://localhost:" + strconv.Itoa(hl.Addr().(*net.TCPAddr).Port) + "/")
	if err != nil {
		t.Fatalf("HTTPS metrics listener: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "ok" || resp.ProtoMajor != 1 {
		t.Errorf("HTTPS: %s %q", resp.Proto, body)
	}
}
