// Command apron is the Apron server and its client tools.
//
//	apron serve [flags]                      run the server
//	apron query [--db D] [--format F] SQL    run SQL, print or save the result
//	apron write --db D --table T FILE...     load CSV, Parquet, Arrow, JSON lines, line protocol
//	apron show databases|tables|…            what the server holds
//	apron bench write|query|mixed            the load generator
//	apron token create|list|revoke           API tokens
//	apron version | completion bash|zsh|fish
//
// Every flag of serve can also be set in the environment as
// APRON_<FLAG>, upper case with dashes as underscores
// (APRON_DATA_DIR=/var/lib/apron); a flag on the command line wins. Of
// the client commands, only the connection flags (--host, --token,
// --tls-*, --timeout) and --db (APRON_DATABASE) are read from the
// environment: APRON_DATA_DIR, set for a server, must not change what a
// client command does.
//
// The client commands talk to a server over Flight SQL and Flight like
// any other client: there is no back door.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
