package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// cliResult is what a run of an apron client command gave.
type cliResult struct {
	stdout, stderr string
	code           int
}

// runApron runs the apron binary with args (stdin from stdin when not
// empty) against nothing in particular: the args say --host. The
// environment is the test's, without APRON_* settings that would change
// what the command does.
func runApron(t testing.TB, stdin string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(apronBin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "APRON_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatalf("apron %s: %v", strings.Join(args, " "), err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("apron %s did not finish in 2 minutes; stderr:\n%s", strings.Join(args, " "), errb.String())
	}
	return cliResult{stdout: out.String(), stderr: errb.String(), code: cmd.ProcessState.ExitCode()}
}

// mustApron is runApron requiring exit code 0.
func mustApron(t testing.TB, stdin string, args ...string) cliResult {
	t.Helper()
	r := runApron(t, stdin, args...)
	if r.code != 0 {
		t.Fatalf("apron %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// writeTemp writes content to a file named name in a temporary directory
// and returns its path.
func writeTemp(t testing.TB, name string, content []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, content, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

var timingRE = regexp.MustCompile(`in [0-9.]+ (µs|ms|s)\b`)

// checkGolden compares got with testdata/cli/name, after replacing the
// query time (which varies); APRON_UPDATE_GOLDEN=1 rewrites the file.
func checkGolden(t testing.TB, name, got string) {
	t.Helper()
	got = timingRE.ReplaceAllString(got, "in X s")
	path := filepath.Join("testdata", "cli", name)
	if os.Getenv("APRON_UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (APRON_UPDATE_GOLDEN=1 writes it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (APRON_UPDATE_GOLDEN=1 rewrites it)\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}
