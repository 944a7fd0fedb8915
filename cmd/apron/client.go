package main

// The client side of the CLI: how `apron token` (and later client
// commands) reach a server over Arrow Flight.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/apron-db/apron/internal/grpccode"
)

// defaultClientHost is where client commands look for a server: the
// default --addr of apron serve.
const defaultClientHost = "127.0.0.1:8082"

// clientFlags are the connection flags of a client command.
type clientFlags struct {
	host          string
	token         string
	tlsCA         string
	tlsCert       string
	tlsKey        string
	tlsSkipVerify bool
	timeout       time.Duration
}

// clientFlagNames are the flags register adds; only these are read from
// the environment (APRON_HOST, APRON_TOKEN, APRON_TLS_CA, …).
var clientFlagNames = []string{"host", "token", "tls-ca", "tls-cert", "tls-key", "tls-skip-verify", "timeout"}

// register adds the connection flags to fs. timeout is the default of
// --timeout, the bound on the whole command's calls (0: none).
func (c *clientFlags) register(fs *flag.FlagSet, timeout time.Duration) {
	fs.StringVar(&c.host, "host", defaultClientHost, "server address: host:port or grpc://host:port (plain gRPC), grpc+tcp://host:port (plain), grpc+tls://host:port (TLS)")
	fs.StringVar(&c.token, "token", "", "API token sent as \"authorization: Bearer <token>\" (better in APRON_TOKEN than on a command line others can see)")
	fs.StringVar(&c.tlsCA, "tls-ca", "", "PEM file of the root CAs that sign the server's certificate (grpc+tls://); default: the system roots")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "PEM file of a client certificate, for servers that require one (mTLS); needs --tls-key")
	fs.StringVar(&c.tlsKey, "tls-key", "", "PEM file of the client certificate's private key")
	fs.BoolVar(&c.tlsSkipVerify, "tls-skip-verify", false, "do not check the server's certificate (testing only: anyone on the path could impersonate the server and read the token)")
	fs.DurationVar(&c.timeout, "timeout", timeout, "give up after this long; 0 = never")
}

// applyEnv sets the connection flags not given on the command line from
// APRON_<FLAG>. The command's other flags are not read from the
// environment: APRON_DATA_DIR, set for the server, must not turn a client
// command into an offline one.
func (c *clientFlags) applyEnv(fs *flag.FlagSet) error {
	return applyEnvNames(fs, clientFlagNames)
}

// applyEnvNames is applyEnv for only the named flags of fs.
func applyEnvNames(fs *flag.FlagSet, names []string) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, n := range names {
		if given[n] || fs.Lookup(n) == nil {
			continue
		}
		env := "APRON_" + strings.ToUpper(strings.ReplaceAll(n, "-", "_"))
		if v, ok := os.LookupEnv(env); ok {
			if err := fs.Set(n, v); err != nil {
				if n == "token" {
					return fmt.Errorf("%s: %w", env, err) // never the value
				}
				return fmt.Errorf("%s=%q: %w", env, v, err)
			}
		}
	}
	return nil
}

// givenOnCommandLine is the set of flags of fs set by args (not by the
// environment: call it before applyEnv).
func givenOnCommandLine(fs *flag.FlagSet) map[string]bool {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	return given
}

// parseHost reads --host: host:port, grpc://host:port, grpc+tcp://host:port
// (plain gRPC) or grpc+tls://host:port (TLS). It returns the gRPC target
// (host:port) and whether to use TLS.
func parseHost(s string) (addr string, useTLS bool, err error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", false, errors.New("--host is empty: want host:port, grpc://host:port or grpc+tls://host:port")
	}
	addr = s
	if i := strings.Index(s, "://"); i >= 0 {
		u, perr := url.Parse(s)
		if perr != nil {
			return "", false, fmt.Errorf("--host %q: %w", s, perr)
		}
		switch strings.ToLower(u.Scheme) {
		case "grpc", "grpc+tcp":
		case "grpc+tls":
			useTLS = true
		default:
			return "", false, fmt.Errorf("--host %q: scheme %q: want grpc:// or grpc+tcp:// (plain gRPC) or grpc+tls:// (TLS)", s, u.Scheme)
		}
		if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			return "", false, fmt.Errorf("--host %q: want only %s://host:port, no user, path or query", s, u.Scheme)
		}
		addr = u.Host
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", false, fmt.Errorf("--host %q: want host:port (e.g. %s): %w", s, defaultClientHost, err)
	}
	if host == "" {
		return "", false, fmt.Errorf("--host %q: no host name or address", s)
	}
	if port == "" {
		return "", false, fmt.Errorf("--host %q: no port", s)
	}
	return addr, useTLS, nil
}

// tlsConfig is the TLS configuration of --tls-ca, --tls-cert, --tls-key
// and --tls-skip-verify; it warns on stderr of --tls-skip-verify.
func (c *clientFlags) tlsConfig(stderr io.Writer) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.tlsCA != "" {
		pem, err := os.ReadFile(c.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in it", c.tlsCA)
		}
		cfg.RootCAs = pool
	}
	if (c.tlsCert == "") != (c.tlsKey == "") {
		return nil, errors.New("--tls-cert and --tls-key go together: give both for a client certificate, or neither")
	}
	if c.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(c.tlsCert, c.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("client certificate (--tls-cert %s, --tls-key %s): %w", c.tlsCert, c.tlsKey, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if c.tlsSkipVerify {
		fmt.Fprintln(stderr, "apron: warning: --tls-skip-verify: the server's certificate is not checked; anyone on the path could impersonate the server and read the token")
		cfg.InsecureSkipVerify = true
	}
	return cfg, nil
}

// dialOptions returns the gRPC target and the dial options of the flags:
// what flight.NewClientWithMiddleware and flightsql.NewClient take.
func (c *clientFlags) dialOptions(stderr io.Writer) (string, []grpc.DialOption, error) {
	addr, useTLS, err := parseHost(c.host)
	if err != nil {
		return "", nil, err
	}
	if !useTLS {
		for _, f := range []struct {
			name string
			set  bool
		}{{"--tls-ca", c.tlsCA != ""}, {"--tls-cert", c.tlsCert != ""}, {"--tls-key", c.tlsKey != ""}, {"--tls-skip-verify", c.tlsSkipVerify}} {
			if f.set {
				return "", nil, fmt.Errorf("%s is set but --host %s is plain gRPC: for TLS use --host grpc+tls://%s", f.name, c.host, addr)
			}
		}
		return addr, []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, nil
	}
	cfg, err := c.tlsConfig(stderr)
	if err != nil {
		return "", nil, err
	}
	return addr, []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(cfg))}, nil
}

// outgoing is ctx carrying the token as "authorization: Bearer <token>",
// for every call made with it (ctx itself without --token).
func (c *clientFlags) outgoing(ctx context.Context) context.Context {
	if c.token == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+c.token)
}

// connect makes a Flight client of the flags and returns it with the
// context its calls take: ctx with the authorization header, bounded by
// --timeout. Call cancel, then Close the client, when done. The
// connection is made at the first call.
func (c *clientFlags) connect(ctx context.Context, stderr io.Writer) (flight.Client, context.Context, context.CancelFunc, error) {
	addr, opts, err := c.dialOptions(stderr)
	if err != nil {
		return nil, nil, nil, err
	}
	cl, err := flight.NewClientWithMiddleware(addr, nil, nil, opts...)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("connecting to %s: %w", c.host, c.redact(err))
	}
	cancel := context.CancelFunc(func() {})
	if c.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
	}
	return cl, c.outgoing(ctx), cancel, nil
}

// doAction runs a Flight action and returns the bodies of its results.
// Errors are as callError makes them.
func (c *clientFlags) doAction(ctx context.Context, cl flight.Client, typ string, body []byte) ([][]byte, error) {
	stream, err := cl.DoAction(ctx, &flight.Action{Type: typ, Body: body})
	if err != nil {
		return nil, c.callError(typ, err)
	}
	var out [][]byte
	for {
		r, err := stream.Recv()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, c.callError(typ, err)
		}
		out = append(out, r.GetBody())
	}
}

// rpcError is a failed call as the CLI reports it: "CODE: message", with
// a hint for the usual mistakes.
type rpcError struct {
	Code codes.Code
	Msg  string
}

func (e *rpcError) Error() string { return codeName(e.Code) + ": " + e.Msg }

// callError is err of a call to action (for hints) as an *rpcError,
// without the token in it.
func (c *clientFlags) callError(action string, err error) error {
	st, ok := status.FromError(err)
	if !ok {
		if errors.Is(err, context.DeadlineExceeded) {
			return &rpcError{Code: codes.DeadlineExceeded, Msg: fmt.Sprintf("no answer from %s within %s (--timeout)", c.host, c.timeout)}
		}
		if errors.Is(err, context.Canceled) {
			return &rpcError{Code: codes.Canceled, Msg: "cancelled"}
		}
		return &rpcError{Code: codes.Unknown, Msg: c.redact(err).Error()}
	}
	msg := c.redactString(st.Message())
	switch st.Code() {
	case codes.Unavailable:
		msg += fmt.Sprintf(" (is apron serve running at %s? A TLS server needs --host grpc+tls://HOST:PORT, a plain one grpc://HOST:PORT)", c.host)
	case codes.DeadlineExceeded:
		if c.timeout > 0 {
			msg += fmt.Sprintf(" (no answer within --timeout %s)", c.timeout)
		}
	case codes.Unauthenticated:
		if c.token == "" {
			msg += " (no token given: set --token or APRON_TOKEN)"
		}
	case codes.Unimplemented:
		if action != "" {
			msg += fmt.Sprintf(" (the server at %s does not know the action %s: is it an Apron server of this version?)", c.host, action)
		}
	}
	return &rpcError{Code: st.Code(), Msg: msg}
}

func (c *clientFlags) redactString(s string) string {
	if c.token == "" {
		return s
	}
	return strings.ReplaceAll(s, c.token, "<token>")
}

func (c *clientFlags) redact(err error) error {
	if c.token == "" || !strings.Contains(err.Error(), c.token) {
		return err
	}
	return errors.New(c.redactString(err.Error()))
}

// codeName is the canonical name of a gRPC code, as the gRPC spec spells
// it (UNAUTHENTICATED, PERMISSION_DENIED, …).
func codeName(c codes.Code) string { return grpccode.Name(c) }

// errUsage is wrapped by errors already reported on stderr with the
// command's usage (a bad flag): the process exits 2 without repeating it.
var errUsage = errors.New("usage")

// exitCode reports err of a CLI command on stderr (unless it was already)
// and returns the process's exit code: 0 for nil and for -h, 2 for a usage
// error, 1 otherwise.
func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	default:
		fmt.Fprintln(stderr, "apron:", err)
		return 1
	}
}

// parseFlags parses args with fs, letting flags and positional arguments
// mix (apron token revoke ID --host H), and returns the positional ones.
// A flag error (already printed by fs) wraps errUsage; -h is
// flag.ErrHelp.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %w", errUsage, err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
