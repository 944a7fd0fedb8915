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

# The integration tests also drive the server from the clients its users
# run, each installed once from its registry and reused (delete the
# directory to take newer versions). Without python3, java and mvn, or
# node and npm, the tests of those clients say they are skipped; with
# CI=true (.ci/run) they fail instead.
#
# Python's ADBC driver, pandas, polars, pyarrow and InfluxDB 3's Python
# client, in a venv.
if command -v python3 >/dev/null 2>&1; then
  PYENV="${APRON_PYENV:-${TMPDIR:-/tmp}/apron-test-pyenv}"
  if ! "$PYENV/bin/python" -c "import adbc_driver_flightsql, pyarrow, pandas, polars, influxdb_client_3" 2>/dev/null; then
    echo "== Python venv for the client tests: $PYENV"
    python3 -m venv "$PYENV"
    "$PYENV/bin/pip" install --quiet adbc-driver-flightsql pyarrow pandas polars influxdb3-python
  fi
  export APRON_TEST_PYTHON="$PYENV/bin/python"
fi

# A Node Flight SQL client and apache-arrow, from npm.
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
  NODEDIR="${APRON_NODE_DIR:-${TMPDIR:-/tmp}/apron-test-node}"
  if ! NODE_PATH="$NODEDIR/node_modules" node -e 'require("@lakehouse-rs/flight-sql-client"); require("apache-arrow")' 2>/dev/null; then
    echo "== Node packages for the client test: $NODEDIR"
    mkdir -p "$NODEDIR"
    npm install --prefix "$NODEDIR" --no-audit --no-fund --loglevel=error @lakehouse-rs/flight-sql-client apache-arrow
  fi
  export APRON_TEST_NODE_DIR="$NODEDIR"
fi

# ... and from the Arrow Flight SQL JDBC driver (DBeaver, Tableau,
# Superset), fetched once from Maven Central. Without java and mvn that
# test says it is skipped.
if command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1; then
  JDBC_VERSION=18.3.0
  JDBC_JAR="$HOME/.m2/repository/org/apache/arrow/flight-sql-jdbc-driver/$JDBC_VERSION/flight-sql-jdbc-driver-$JDBC_VERSION.jar"
  if [ ! -f "$JDBC_JAR" ]; then
    echo "== Flight SQL JDBC driver $JDBC_VERSION from Maven Central"
    mvn --batch-mode --quiet dependency:get -Dartifact="org.apache.arrow:flight-sql-jdbc-driver:$JDBC_VERSION"
  fi
  export APRON_TEST_JDBC_JAR="$JDBC_JAR"
fi

echo "== go vet (build tag duckdb_arrow: the query engine links DuckDB)"
go vet -tags duckdb_arrow ./...

echo "== go test -race"
go test -tags duckdb_arrow -race -count=1 -timeout 20m ./...

echo "== fuzz (${FUZZTIME} executions each)"
for pkg in ./wal ./flightsvc ./query ./input ./output; do
  for target in $(go test -tags duckdb_arrow -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    echo "-- $pkg $target"
    go test -tags duckdb_arrow -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "$pkg"
  done
done
