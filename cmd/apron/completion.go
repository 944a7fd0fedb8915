package main

import "io"

// serveFlagNames lists --flag\tusage for every flag of apron serve, for
// shell completion.
func serveFlagNames(args []string) []string {
	_, fs := newServeFlagSet()
	fs.SetOutput(io.Discard)
	return flagCompletions(fs)
}
