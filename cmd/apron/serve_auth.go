package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/apron-db/apron/auth"
	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/catalog"
)

// authFlags are the flags of authentication of `apron serve`.
type authFlags struct {
	adminTokenFile       string
	withoutAuth          bool
	withoutAuthOnNetwork bool
}

func (a *authFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.adminTokenFile, "admin-token-file", "", "file holding an admin token: read at start (and made an admin token if the catalog lacks it); if the file does not exist, a new admin token is written to it (mode 0600). Without it, the first start of a data dir prints a new admin token once on stderr")
	fs.BoolVar(&a.withoutAuth, "without-auth", false, "run without authentication: every client may read and write everything. Refused unless --addr (and --metrics-addr) are loopback addresses, or --without-auth-on-network is given too")
	fs.BoolVar(&a.withoutAuthOnNetwork, "without-auth-on-network", false, "allow --without-auth on a non-loopback address (logged as a warning at every start)")
}

// check refuses --without-auth where the network can reach the server.
func (a *authFlags) check(addr, metricsAddr string) error {
	if a.withoutAuthOnNetwork && !a.withoutAuth {
		return errors.New("--without-auth-on-network is given without --without-auth")
	}
	if !a.withoutAuth || a.withoutAuthOnNetwork {
		return nil
	}
	if !isLoopback(addr) {
		return fmt.Errorf("--without-auth with --addr %s: anyone who can reach that address could read and write every database. Listen on a loopback address (127.0.0.1:8082), or also give --without-auth-on-network if the network is private", addr)
	}
	if metricsAddr != "" && !isLoopback(metricsAddr) {
		return fmt.Errorf("--without-auth with --metrics-addr %s: /metrics and /debug/pprof/ would be open to the network. Use a loopback address, --metrics-addr '' to turn them off, or also give --without-auth-on-network", metricsAddr)
	}
	if a.adminTokenFile != "" {
		return errors.New("--admin-token-file with --without-auth: tokens are not checked without authentication; drop one of them")
	}
	return nil
}

// isLoopback says whether a listen address reaches only this machine. An
// empty host ("":8082) or 0.0.0.0 listens on every interface.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// setupAuth returns the verifier of the server's tokens (nil without
// authentication), after making sure there is an admin token: the one of
// --admin-token-file, or, when the catalog has no token at all (a new
// data dir, or one from before tokens), a new one printed on stderr.
func (a *authFlags) setup(wb *buffer.WriteBuffer, dataDir string, log *slog.Logger, stderr io.Writer) (*auth.Verifier, error) {
	if a.withoutAuth {
		if a.withoutAuthOnNetwork {
			log.Warn("running WITHOUT AUTHENTICATION on a network address (--without-auth --without-auth-on-network): anyone who can reach the server can read and write every database")
		} else {
			log.Warn("running without authentication (--without-auth): every client on this machine can read and write every database")
		}
		return nil, nil
	}
	v := auth.NewVerifier(wb.Catalog(), nil)
	if a.adminTokenFile != "" {
		if err := adminTokenFromFile(wb, a.adminTokenFile, log); err != nil {
			return nil, err
		}
		return v, nil
	}
	if wb.Catalog().Snapshot().NumTokens() > 0 {
		return v, nil
	}
	tok, rec, err := auth.Generate("first admin token (made at the first start)", time.Now())
	if err != nil {
		return nil, err
	}
	rec.Admin = true
	if err := wb.ChangeTokens(catalog.TokenChange{Add: []*catalog.Token{rec}}); err != nil {
		return nil, fmt.Errorf("making the first admin token: %w", err)
	}
	log.Info("made the first admin token; it is printed on stderr, once", "id", rec.ID)
	fmt.Fprintf(stderr, `
================================================================================
Apron admin token (shown this once; it is stored only as a hash):

    %s

Clients send it as "authorization: Bearer <token>", or as the password of a
user/password login (any user name). Make scoped tokens with it:
    apron token create --token <admin token> --read mydb
Lost it? Stop the server and make a new one on its data dir:
    apron token create --admin --data-dir %s --force
================================================================================

`, tok, dataDir)
	return v, nil
}

// adminTokenFromFile makes sure the token in path is an admin token of the
// catalog, writing a new one to path first if there is no such file.
func adminTokenFromFile(wb *buffer.WriteBuffer, path string, log *slog.Logger) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		tok, rec, err := auth.Generate("admin token of --admin-token-file", time.Now())
		if err != nil {
			return err
		}
		rec.Admin = true
		// The file first: if the catalog change then fails, the next
		// start finds the file and adds its token.
		if err := writeSecretFile(path, []byte(tok+"\n")); err != nil {
			return fmt.Errorf("--admin-token-file: %w", err)
		}
		if err := wb.ChangeTokens(catalog.TokenChange{Add: []*catalog.Token{rec}}); err != nil {
			return fmt.Errorf("--admin-token-file: adding its token to the catalog: %w", err)
		}
		log.Info("wrote a new admin token to --admin-token-file", "path", path, "id", rec.ID)
		return nil
	}
	if err != nil {
		return fmt.Errorf("--admin-token-file: %w", err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		log.Warn("--admin-token-file can be read by other users; chmod 600 it", "path", path, "mode", fi.Mode().Perm().String())
	}
	tok := strings.TrimSpace(string(data))
	id, ok := auth.ParseID(tok)
	if !ok {
		return fmt.Errorf("--admin-token-file %s does not hold an Apron token (%d characters starting with %q): delete the file to have a new token written to it", path, auth.TokenLen, auth.Prefix)
	}
	if t, ok := wb.Catalog().Snapshot().Token(id); ok {
		switch {
		case t.Hash != auth.Hash(tok):
			return fmt.Errorf("--admin-token-file %s: the catalog holds another token with the same id; delete the file to have a new token written to it", path)
		case !t.Revoked.IsZero():
			return fmt.Errorf("--admin-token-file %s: its token was revoked at %s; delete the file to have a new token written to it", path, t.Revoked.UTC().Format(time.RFC3339))
		case !t.Admin:
			return fmt.Errorf("--admin-token-file %s: its token is not an admin token", path)
		}
		log.Info("admin token of --admin-token-file is in force", "path", path, "id", id)
		return nil
	}
	rec := &catalog.Token{ID: id, Hash: auth.Hash(tok), Description: "admin token of --admin-token-file", Admin: true, Created: time.Now().UTC()}
	if err := wb.ChangeTokens(catalog.TokenChange{Add: []*catalog.Token{rec}}); err != nil {
		return fmt.Errorf("--admin-token-file: adding its token to the catalog: %w", err)
	}
	log.Info("added the token of --admin-token-file as an admin token", "path", path, "id", id)
	return nil
}

// writeSecretFile creates path (it must not exist) with mode 0600 and
// data, durably.
func writeSecretFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(path)
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// metricsAuth guards the metrics endpoints: on a loopback address (or
// without authentication) they are open; else a request needs an admin
// token or one with the metrics permission, as a bearer token (Prometheus
// scrape config "authorization: credentials_file") or a basic-auth
// password.
func metricsAuth(v *auth.Verifier, addr string, next http.Handler) http.Handler {
	if v == nil || isLoopback(addr) {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := ""
		if _, pw, ok := r.BasicAuth(); ok {
			tok = pw
		} else if h := r.Header.Get("Authorization"); len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
			tok = strings.TrimSpace(h[7:])
		}
		if tok == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="apron metrics"`)
			http.Error(w, "the metrics endpoints need a token with the metrics permission (or an admin token): send Authorization: Bearer <token>", http.StatusUnauthorized)
			return
		}
		p, err := v.Verify(tok)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="apron metrics"`)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		if !p.Metrics() {
			http.Error(w, fmt.Sprintf("token %s may not read the metrics endpoints: it needs the metrics permission ({\"actions\": [\"metrics\"]}) or admin", p.ID()), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}
