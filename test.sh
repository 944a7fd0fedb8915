#!/usr/bin/env bash
# The project's test command: vet, every package's tests (with the race
# detector), and a few seconds of each fuzz target. README and .ci/run call
# exactly this.
set -euo pipefail
cd "$(dirname "$0")"

FUZZTIME="${FUZZTIME:-5s}"

echo "== go vet"
go vet ./...

echo "== go test -race"
go test -race -count=1 -timeout 20m ./...

echo "== fuzz (${FUZZTIME} each)"
for pkg in ./wal; do
  for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    echo "-- $pkg $target"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "$pkg"
  done
done
