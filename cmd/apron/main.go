// Command apron is the Apron server and, later, its client tools.
//
//	apron serve [flags]
//	apron token create|list|revoke [flags]
//
// Every flag can also be set in the environment as APRON_<FLAG>, upper
// case with dashes as underscores (APRON_DATA_DIR=/var/lib/apron); a flag
// on the command line wins. Of the client commands (apron token), only
// the connection flags (--host, --token, --tls-*, --timeout) are read from
// the environment.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		if err := serve(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "apron:", err)
			os.Exit(1)
		}
	case "token":
		os.Exit(exitCode(tokenCommand(os.Args[2:], os.Stdout, os.Stderr), os.Stderr))
	case "help", "-h", "--help":
		usage()
	default:
		fmt.Fprintf(os.Stderr, "apron: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage: apron <command> [flags]

commands:
  serve   run the server (apron serve -h lists its flags)
  token   create, list and revoke API tokens (apron token -h)`)
}
