package main

// apron token create|list|revoke: API tokens, through a running server's
// Flight actions, or (create only) offline in a stopped server's data dir.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/apron-db/apron/auth"
	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/catalog"
)

// The Flight actions of tokens.
const (
	actionTokenCreate = "apron.token.create"
	actionTokenList   = "apron.token.list"
	actionTokenRevoke = "apron.token.revoke"
)

// defaultTokenTimeout bounds a token command's calls.
const defaultTokenTimeout = 30 * time.Second

// defaultOfflineDescription describes an admin token made with --data-dir
// when --description is not given.
const defaultOfflineDescription = "recovery admin token (apron token create --data-dir)"

const tokenUsage = `usage: apron token <command> [flags]

commands:
  create   make a token and print it (the only time it is shown)
  list     list the tokens: id, permissions, expiry, last use
  revoke   revoke a token by its id

Each takes -h for its flags. They call the server at --host (APRON_HOST)
with an admin token in --token (APRON_TOKEN).

example:
  export APRON_TOKEN=apron_...   # an admin token
  TOKEN=$(apron token create --description grafana --read metrics --expires-in 90d)
  apron token list
  apron token revoke 0123456789abcdef

With no admin token at hand, stop the server and make one in its data dir:
  apron token create --admin --data-dir /var/lib/apron --force
`

// tokenCommand runs `apron token` with args (after "token"). Errors are
// for exitCode.
func tokenCommand(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, tokenUsage)
		return errUsage
	}
	switch args[0] {
	case "create":
		return tokenCreate(args[1:], stdout, stderr)
	case "list":
		return tokenList(args[1:], stdout, stderr)
	case "revoke":
		return tokenRevoke(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stderr, tokenUsage)
		return flag.ErrHelp
	default:
		fmt.Fprintf(stderr, "apron token: unknown command %q\n\n%s", args[0], tokenUsage)
		return errUsage
	}
}

// newTokenFlagSet is a flag set that prints synopsis, then the flags.
func newTokenFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("apron token "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, synopsis)
		fmt.Fprintln(stderr, "\nflags:")
		fs.PrintDefaults()
	}
	return fs
}

// grantArg is one --read DB or --write DB.
type grantArg struct{ database, action string }

// grantFlag is --read or --write: repeatable, each appending to one list,
// so that the databases keep the order they were named in.
type grantFlag struct {
	action string
	list   *[]grantArg
}

func (g grantFlag) String() string {
	if g.list == nil {
		return ""
	}
	var dbs []string
	for _, a := range *g.list {
		if a.action == g.action {
			dbs = append(dbs, a.database)
		}
	}
	return strings.Join(dbs, ",")
}

func (g grantFlag) Set(s string) error {
	if strings.TrimSpace(s) == "" {
		return errors.New("want a database name, or '*' for every database")
	}
	*g.list = append(*g.list, grantArg{database: s, action: g.action})
	return nil
}

// tokenCreateFlags are the flags of apron token create.
type tokenCreateFlags struct {
	client      clientFlags
	description string
	admin       bool
	grants      []grantArg // --read and --write in order
	metrics     bool
	expiresIn   string
	json        bool
	dataDir     string
	force       bool
	// descriptionGiven: --description was on the command line.
	descriptionGiven bool
}

const tokenCreateSynopsis = `usage: apron token create [--description D] (--admin | [--read DB]... [--write DB]... [--metrics]) [--expires-in 720h|30d] [--json]
       apron token create --admin --data-dir DIR --force      (offline, on a stopped server)

Makes a token and prints it alone on stdout's first line, so that
TOKEN=$(apron token create ...) works; a note on stderr says its id,
permissions and expiry. The token is shown this once: store it now.
DB is a database name or '*' (every database, present and future).
`

// parseTokenCreateFlags reads and checks the flags of apron token create.
func parseTokenCreateFlags(args []string, stderr io.Writer) (*tokenCreateFlags, error) {
	f := &tokenCreateFlags{}
	fs := newTokenFlagSet("create", tokenCreateSynopsis, stderr)
	f.client.register(fs, defaultTokenTimeout)
	fs.StringVar(&f.description, "description", "", "what the token is for, shown in lists")
	fs.BoolVar(&f.admin, "admin", false, "permit everything, managing tokens included")
	fs.Var(grantFlag{"read", &f.grants}, "read", "permit reading database `DB` ('*': every database); repeatable")
	fs.Var(grantFlag{"write", &f.grants}, "write", "permit writing (and creating) database `DB` ('*': every database); repeatable")
	fs.BoolVar(&f.metrics, "metrics", false, "permit the HTTP /metrics and /debug/pprof/ endpoints")
	fs.StringVar(&f.expiresIn, "expires-in", "", "expire after this long, e.g. 720h or 30d; default: never")
	fs.BoolVar(&f.json, "json", false, "print the whole JSON answer on stdout instead of the token alone")
	fs.StringVar(&f.dataDir, "data-dir", "", "offline: add the token to the catalog in this data dir of a stopped server, not through a server (needs --force)")
	fs.BoolVar(&f.force, "force", false, "allow --data-dir")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return nil, err
	}
	if len(pos) > 0 {
		return nil, fmt.Errorf("apron token create takes no arguments, only flags (got %q); the description goes in --description", pos[0])
	}
	given := givenOnCommandLine(fs)
	f.descriptionGiven = given["description"]
	if f.dataDir != "" {
		// The environment's connection settings are not for an offline
		// create: only what is on the command line conflicts.
		for _, n := range clientFlagNames {
			if given[n] {
				return nil, fmt.Errorf("--data-dir works on the data dir without a server; --%s is for reaching a server: give one or the other", n)
			}
		}
		if !f.force {
			return nil, fmt.Errorf("--data-dir writes a token into the catalog of %s without asking any server, and so without authentication: "+
				"that is for recovery, when no admin token is at hand (whoever can write the data dir can do everything anyway). "+
				"Stop the server, then add --force to confirm", f.dataDir)
		}
	} else {
		if f.force {
			return nil, errors.New("--force is only for --data-dir")
		}
		if err := f.client.applyEnv(fs); err != nil {
			return nil, err
		}
	}
	if !f.admin && len(f.grants) == 0 && !f.metrics {
		return nil, errors.New("no permission given: a token needs --admin, or at least one of --read DB, --write DB, --metrics")
	}
	if f.admin && (len(f.grants) > 0 || f.metrics) {
		return nil, errors.New("--admin already permits everything: leave out --read, --write and --metrics")
	}
	if f.dataDir != "" && !f.descriptionGiven && f.admin {
		f.description = defaultOfflineDescription
	}
	if f.dataDir != "" && !f.descriptionGiven && !f.admin {
		f.description = "token made offline (apron token create --data-dir)"
	}
	if _, err := f.request(); err != nil {
		return nil, err
	}
	return f, nil
}

// permissions is the permissions value of the create request: "admin", or
// one {"database", "actions"} per database in the order first named, read
// before write, then {"actions": ["metrics"]}.
func (f *tokenCreateFlags) permissions() any {
	if f.admin {
		return "admin"
	}
	perms := []auth.Permission{}
	acts := map[string]map[string]bool{}
	for _, g := range f.grants {
		if acts[g.database] == nil {
			acts[g.database] = map[string]bool{}
			perms = append(perms, auth.Permission{Database: g.database})
		}
		acts[g.database][g.action] = true
	}
	for i := range perms {
		for _, a := range []string{"read", "write"} {
			if acts[perms[i].Database][a] {
				perms[i].Actions = append(perms[i].Actions, a)
			}
		}
	}
	if f.metrics {
		perms = append(perms, auth.Permission{Actions: []string{"metrics"}})
	}
	return perms
}

// request is the body of apron.token.create, checked as the server will
// check it (auth.ParseCreate).
func (f *tokenCreateFlags) request() ([]byte, error) {
	perms, err := json.Marshal(f.permissions())
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(auth.CreateRequest{Description: f.description, Permissions: perms, ExpiresIn: f.expiresIn})
	if err != nil {
		return nil, err
	}
	if _, err := auth.ParseCreate(body, time.Now()); err != nil {
		return nil, flagError(err)
	}
	return body, nil
}

// flagError rewords a request error of auth in terms of the flags.
func flagError(err error) error {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, auth.ErrInvalidRequest.Error()+": ")
	msg = strings.ReplaceAll(msg, "expires_in", "--expires-in")
	msg = strings.ReplaceAll(msg, "description is", "--description is")
	return errors.New(msg)
}

// createdToken is the answer of apron.token.create.
type createdToken struct {
	ID          string          `json:"id"`
	Token       string          `json:"token"`
	Description string          `json:"description"`
	Permissions json.RawMessage `json:"permissions"`
	Created     time.Time       `json:"created"`
	Expires     *time.Time      `json:"expires"`
}

func tokenCreate(args []string, stdout, stderr io.Writer) error {
	f, err := parseTokenCreateFlags(args, stderr)
	if err != nil {
		return err
	}
	if f.dataDir != "" {
		return tokenCreateOffline(f, stdout, stderr)
	}
	body, err := f.request()
	if err != nil {
		return err
	}
	results, err := f.client.action(stderr, actionTokenCreate, body)
	if err != nil {
		return err
	}
	if len(results) != 1 {
		return fmt.Errorf("%s answered %d results, want 1", actionTokenCreate, len(results))
	}
	var ct createdToken
	if err := json.Unmarshal(results[0], &ct); err != nil {
		return fmt.Errorf("%s answered something other than a token: %w", actionTokenCreate, err)
	}
	if !auth.Valid(ct.Token) {
		return fmt.Errorf("%s answered no token (or a malformed one)", actionTokenCreate)
	}
	return printCreated(&ct, results[0], f.json, stdout, stderr)
}

// action connects to the server, runs the Flight action typ with body and
// returns the bodies of its results, as doAction; the connection is closed
// when it returns.
func (c *clientFlags) action(stderr io.Writer, typ string, body []byte) ([][]byte, error) {
	cl, ctx, cancel, err := c.connect(context.Background(), stderr)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	defer cancel()
	return c.doAction(ctx, cl, typ, body)
}

// printJSONLines prints the results of the action typ on stdout, each
// compacted on a line of its own, and nothing if one is not JSON.
func printJSONLines(stdout io.Writer, typ string, results ...[]byte) error {
	var buf bytes.Buffer
	for _, r := range results {
		if err := json.Compact(&buf, r); err != nil {
			return fmt.Errorf("%s answered invalid JSON: %w", typ, err)
		}
		buf.WriteByte('\n')
	}
	_, err := stdout.Write(buf.Bytes())
	return err
}

// printCreated prints a new token: alone on stdout (or raw, the whole JSON
// answer, with --json), and a note on stderr.
func printCreated(ct *createdToken, raw []byte, asJSON bool, stdout, stderr io.Writer) error {
	if asJSON {
		if err := printJSONLines(stdout, actionTokenCreate, raw); err != nil {
			return err
		}
	} else if _, err := fmt.Fprintln(stdout, ct.Token); err != nil {
		return err
	}
	expires := "never"
	if ct.Expires != nil {
		expires = formatTime(*ct.Expires)
	}
	fmt.Fprintf(stderr, "created token %s (permissions %s, expires %s)\n", ct.ID, compactPermissions(ct.Permissions), expires)
	fmt.Fprintln(stderr, "this is the only time the token is shown; store it now")
	return nil
}

// tokenCreateOffline adds the token to the catalog in f.dataDir, which no
// server may have open.
func tokenCreateOffline(f *tokenCreateFlags, stdout, stderr io.Writer) error {
	st, err := os.Stat(f.dataDir)
	if err != nil {
		return fmt.Errorf("--data-dir: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("--data-dir %s is not a directory", f.dataDir)
	}
	now := time.Now()
	body, err := f.request()
	if err != nil {
		return err
	}
	perms, err := auth.ParseCreate(body, now)
	if err != nil {
		return flagError(err)
	}
	token, rec, err := auth.Generate(f.description, now)
	if err != nil {
		return err
	}
	rec.Admin, rec.Metrics, rec.Grants, rec.Expires = perms.Admin, perms.Metrics, perms.Grants, perms.Expires
	if _, err := os.Stat(filepath.Join(f.dataDir, "catalog.json")); errors.Is(err, os.ErrNotExist) {
		// A catalog started here would be older than one in the object
		// store, which the server installs at startup: the token would
		// silently be gone. A new data dir needs no recovery anyway.
		return fmt.Errorf("%s has no catalog.json: it is not the data dir of a server that has started (check --data-dir); a server's first start on a new data dir prints an admin token", f.dataDir)
	}
	err = buffer.ChangeTokensOffline(f.dataDir, catalog.TokenChange{Add: []*catalog.Token{rec}, Now: now})
	if errors.Is(err, buffer.ErrLocked) {
		return fmt.Errorf("%w\na server has %s open: stop the server first, or make the token through the running server with an admin token (apron token create --admin --token ...)", err, f.dataDir)
	}
	if err != nil {
		return err
	}
	ct := &createdToken{ID: rec.ID, Token: token, Description: rec.Description, Created: rec.Created}
	if ct.Permissions, err = json.Marshal(auth.Permissions(rec)); err != nil {
		return err
	}
	if !rec.Expires.IsZero() {
		e := rec.Expires
		ct.Expires = &e
	}
	raw, err := json.Marshal(ct)
	if err != nil {
		return err
	}
	if err := printCreated(ct, raw, f.json, stdout, stderr); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "written to %s; the server uses it when it next starts\n", filepath.Join(f.dataDir, "catalog.json"))
	return nil
}

// tokenInfo is one token as apron.token.list answers it (auth.TokenInfo).
type tokenInfo struct {
	ID          string          `json:"id"`
	Description string          `json:"description"`
	Permissions json.RawMessage `json:"permissions"`
	Created     time.Time       `json:"created"`
	Expires     *time.Time      `json:"expires"`
	LastUsed    *time.Time      `json:"last_used"`
	Revoked     *time.Time      `json:"revoked"`
	CreatedBy   string          `json:"created_by"`
}

const tokenListSynopsis = `usage: apron token list [--json]

Lists the tokens (revoked ones too, for 30 days after): id, description,
permissions, created, expires, last used (since the server started), status.
Needs an admin token.
`

func tokenList(args []string, stdout, stderr io.Writer) error {
	var c clientFlags
	var asJSON bool
	fs := newTokenFlagSet("list", tokenListSynopsis, stderr)
	c.register(fs, defaultTokenTimeout)
	fs.BoolVar(&asJSON, "json", false, "print one JSON object per token, one a line")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("apron token list takes no arguments (got %q)", pos[0])
	}
	if err := c.applyEnv(fs); err != nil {
		return err
	}
	results, err := c.action(stderr, actionTokenList, nil)
	if err != nil {
		return err
	}
	return printTokenList(results, asJSON, time.Now(), stdout)
}

// printTokenList prints the results of apron.token.list: a table, or with
// asJSON each result compacted on a line of its own.
func printTokenList(results [][]byte, asJSON bool, now time.Time, stdout io.Writer) error {
	if asJSON {
		return printJSONLines(stdout, actionTokenList, results...)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tDESCRIPTION\tPERMISSIONS\tCREATED\tEXPIRES\tLAST USED\tSTATUS")
	for _, r := range results {
		var t tokenInfo
		if err := json.Unmarshal(r, &t); err != nil {
			return fmt.Errorf("%s answered something other than a token: %w", actionTokenList, err)
		}
		desc := cleanCell(t.Description)
		if desc == "" {
			desc = "-"
		}
		expires, lastUsed, state := "never", "-", "active"
		if t.Expires != nil {
			expires = formatTime(*t.Expires)
			if !now.Before(*t.Expires) {
				state = "expired"
			}
		}
		if t.LastUsed != nil {
			lastUsed = formatTime(*t.LastUsed)
		}
		if t.Revoked != nil {
			state = "revoked " + formatTime(*t.Revoked)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cleanCell(t.ID), desc, compactPermissions(t.Permissions), formatTime(t.Created), expires, lastUsed, state)
	}
	return tw.Flush()
}

// cleanCell makes s fit in one cell of a table: no tabs, newlines or other
// control characters.
func cleanCell(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// formatTime is how the token commands show a time: RFC 3339, UTC, to the
// second.
func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// compactPermissions renders permissions as the server sends them
// ("admin", or a list of {"database", "actions"}) compactly: admin, or
// read:db,write:db,metrics.
func compactPermissions(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return cleanCell(s)
	}
	var perms []auth.Permission
	if err := json.Unmarshal(raw, &perms); err != nil {
		return cleanCell(string(raw))
	}
	var parts []string
	for _, p := range perms {
		for _, a := range p.Actions {
			if p.Database == "" {
				parts = append(parts, a)
			} else {
				parts = append(parts, a+":"+p.Database)
			}
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return cleanCell(strings.Join(parts, ","))
}

const tokenRevokeSynopsis = `usage: apron token revoke [flags] ID

Revokes the token with that id (apron token list shows the ids; a whole
token is taken too). A revoked token is refused from its next call, or
its next batch of a running stream. Needs an admin token.
`

// revokedToken is the answer of apron.token.revoke.
type revokedToken struct {
	ID      string    `json:"id"`
	Revoked time.Time `json:"revoked"`
}

func tokenRevoke(args []string, stdout, stderr io.Writer) error {
	var c clientFlags
	var asJSON bool
	fs := newTokenFlagSet("revoke", tokenRevokeSynopsis, stderr)
	c.register(fs, defaultTokenTimeout)
	fs.BoolVar(&asJSON, "json", false, "print the JSON answer")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fmt.Fprintf(stderr, "apron token revoke takes one token id, got %d arguments\n\n", len(pos))
		fs.Usage()
		return errUsage
	}
	id := strings.TrimSpace(pos[0])
	if tid, ok := auth.ParseID(id); ok {
		id = tid // a whole token: never echo it, only its id
	} else if id == "" || strings.HasPrefix(id, auth.Prefix) {
		return errors.New("apron token revoke: want a token id (16 hex digits, from apron token list)")
	}
	if err := c.applyEnv(fs); err != nil {
		return err
	}
	body, err := json.Marshal(map[string]string{"id": id})
	if err != nil {
		return err
	}
	results, err := c.action(stderr, actionTokenRevoke, body)
	if err != nil {
		return err
	}
	if len(results) != 1 {
		return fmt.Errorf("%s answered %d results, want 1", actionTokenRevoke, len(results))
	}
	if asJSON {
		return printJSONLines(stdout, actionTokenRevoke, results[0])
	}
	var rt revokedToken
	if err := json.Unmarshal(results[0], &rt); err != nil {
		return fmt.Errorf("%s answered something unexpected: %w", actionTokenRevoke, err)
	}
	if rt.ID == "" {
		rt.ID = id
	}
	_, err = fmt.Fprintf(stdout, "revoked token %s\n", cleanCell(rt.ID))
	return err
}
