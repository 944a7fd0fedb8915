package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// run runs the apron command line args and returns the process's exit
// code: 0, 1 for a failure (reported on stderr), 2 for a usage error.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCommand(stdin, stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if errors.Is(err, errUsage) {
		return 2
	}
	if isFlagError(err) {
		// cobra's own parse errors (an unknown flag, a bad value).
		fmt.Fprintf(stderr, "apron: %v\nRun '%s --help' for usage.\n", err, cmd.CommandPath())
		return 2
	}
	return exitCode(err, stderr)
}

// isFlagError tells a command-line mistake cobra or pflag found from a
// failure of the command itself.
func isFlagError(err error) bool {
	var ue *usageError
	if errors.As(err, &ue) {
		return true
	}
	msg := err.Error()
	for _, p := range []string{"unknown flag", "unknown shorthand flag", "invalid argument", "flag needs an argument", "unknown command", "accepts ", "requires at least", "requires at most", "bad flag syntax"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

// usageError is a command line that cannot be run as given (a missing
// argument, flags that do not go together): exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// newRootCommand is the apron command tree. serve and token keep their
// own flag parsers (the standard library's, whose single-dash spellings
// like -data-dir scripts already use); cobra passes their arguments
// through and completes their flags from the same definitions.
func newRootCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "apron",
		Short: "Apron: a time-series database that speaks Arrow Flight and Flight SQL",
		Long: `Apron: a time-series database that speaks Arrow Flight and Flight SQL.

Run a server with 'apron serve'; the other commands are its clients and
reach it over Flight SQL like any client (--host, default ` + defaultClientHost + `,
or APRON_HOST; --token or APRON_TOKEN).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// A bare "apron" prints the help and exits 2, as before cobra.
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.Help()
			return errUsage
		},
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.CompletionOptions.HiddenDefaultCmd = false
	root.AddCommand(
		passThroughCommand("serve", "Run the server", "serve [flags]", serveFlagNames, func(args []string) error {
			return serve(args)
		}),
		passThroughCommand("token", "Create, list and revoke API tokens", "token create|list|revoke [flags]", tokenFlagNames, func(args []string) error {
			return tokenCommand(args, stdout, stderr)
		}),
		newQueryCommand(stdin, stdout, stderr),
		newShowCommand(stdout, stderr),
		newVersionCommand(stdout),
	)
	for _, add := range extraCommands {
		root.AddCommand(add(stdin, stdout, stderr))
	}
	return root
}

// extraCommands are subcommands registered by their own files' init
// (write, bench), so each command's wiring stays in its file.
var extraCommands []func(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command

// passThroughCommand is a subcommand that parses its own flags: cobra
// hands it the arguments untouched, and completes flag names from
// flagNames.
func passThroughCommand(name, short, use string, flagNames func(args []string) []string, runFn func(args []string) error) *cobra.Command {
	return &cobra.Command{
		Use:                use,
		Short:              short,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runFn(args)
		},
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			var out []cobra.Completion
			for _, n := range flagNames(args) {
				if strings.HasPrefix(n, toComplete) {
					out = append(out, n)
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		},
	}
}

// tokenFlagNames completes apron token: its subcommands first, then the
// chosen one's flags.
func tokenFlagNames(args []string) []string {
	if len(args) == 0 {
		return []string{"create\tmake a token", "list\tlist tokens", "revoke\trevoke a token"}
	}
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var cf clientFlags
	cf.register(fs, 0)
	out := flagCompletions(fs)
	switch args[0] {
	case "create":
		out = append(out, "--description\twhat the token is for", "--admin\tpermit everything",
			"--read\tpermit reading a database", "--write\tpermit writing a database",
			"--metrics\tpermit /metrics", "--expires-in\texpire after this long", "--json\tprint the whole answer",
			"--data-dir\toffline: the data dir of a stopped server", "--force\tallow --data-dir")
	case "list":
		out = append(out, "--json\tprint JSON lines")
	}
	return out
}

func flagCompletions(fs *flag.FlagSet) []string {
	var out []string
	fs.VisitAll(func(f *flag.Flag) {
		usage := f.Usage
		if i := strings.IndexAny(usage, ".;:("); i > 0 {
			usage = usage[:i]
		}
		out = append(out, "--"+f.Name+"\t"+usage)
	})
	return out
}
