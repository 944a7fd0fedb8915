#!/usr/bin/env bash
# The project's test command: vet, every package's tests (with the race
# detector), and a few seconds of each fuzz target. README and .ci/run call
# exactly this.
set -euo pipefail
cd "$(dirname "$0")"

# An execution count rather than a duration: with -fuzztime 5s the Go fuzz
# coordinator now and then fails with "context deadline exceeded" and no
# failing input (a flake of the engine, not of the code under test).
FUZZTIME="${FUZZTIME:-100000x}"

echo "== go vet (build tag duckdb_arrow: the query engine links DuckDB)"
go vet -tags duckdb_arrow ./...

echo "== go test -race"
go test -tags duckdb_arrow -race -count=1 -timeout 20m ./...

echo "== fuzz (${FUZZTIME} executions each)"
for pkg in ./wal; do
  for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    echo "-- $pkg $target"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "$pkg"
  done
done
