#!/usr/bin/env bash
# Side-by-side benchmark of Apron and QuestDB 9.2.2: see README.md here.
#
#   bench/peer/run.sh --quick                    # a smoke run: 200k rows, one round (~1-2 min)
#   bench/peer/run.sh                            # 5M rows, 3 rounds (~30-40 min on 2 busy cores)
#   APRON_BIN=/path/to/apron bench/peer/run.sh   # any build of Apron
#
# Installs into $APRON_PEER_CACHE (default ~/.cache/apron-peer), once: the
# QuestDB jar from Maven Central (checked against its SHA-1 there) and a
# Python venv with the clients. Without APRON_BIN it builds Apron from this
# checkout into the cache. Every other argument goes to peer.py (--rows,
# --rounds, --quick, --out FILE, --questdb-commit-mode, …; peer.py --help).
# peer.py starts both servers afresh each round, on free loopback ports,
# with data dirs under a temp dir, and stops them; this script removes the
# temp dir at the end.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${APRON_PEER_CACHE:-$HOME/.cache/apron-peer}
questdb_version=9.2.2
mkdir -p "$cache"

for tool in java python3 curl; do
	command -v "$tool" >/dev/null || { echo "run.sh: $tool is needed (QuestDB runs on Java 17+)" >&2; exit 2; }
done

jar=$cache/questdb-$questdb_version.jar
if [ ! -s "$jar" ]; then
	url=https://repo1.maven.org/maven2/org/questdb/questdb/$questdb_version/questdb-$questdb_version.jar
	echo "run.sh: downloading $url" >&2
	curl -fsSL -o "$jar.part" "$url"
	want=$(curl -fsSL "$url.sha1" | cut -c1-40)
	got=$(sha1sum "$jar.part" | cut -c1-40)
	if [ "$want" != "$got" ]; then
		echo "run.sh: $url: SHA-1 $got, Maven Central says $want" >&2
		rm -f "$jar.part"
		exit 1
	fi
	mv "$jar.part" "$jar"
fi

# The clients, pinned to the versions the README's figures were taken with.
venv=$cache/venv
reqs="questdb==6.0.0 adbc-driver-flightsql==1.13.0 adbc-driver-manager==1.13.0 pyarrow==26.0.1 pandas==3.1.1 numpy==2.4.6 psycopg[binary]==3.3.9"
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$venv/.reqs" 2>/dev/null)" != "$reqs" ]; then
	echo "run.sh: installing the Python clients into $venv" >&2
	python3 -m venv "$venv"
	# shellcheck disable=SC2086
	"$venv/bin/pip" install -q $reqs
	echo "$reqs" >"$venv/.reqs"
fi

if [ -z "${APRON_BIN:-}" ]; then
	APRON_BIN=$cache/apron
	echo "run.sh: building $APRON_BIN from $repo" >&2
	(cd "$repo" && go build -tags duckdb_arrow -o "$APRON_BIN" ./cmd/apron)
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/apron-peer.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$venv/bin/python" "$here/peer.py" --apron-bin "$APRON_BIN" --questdb-jar "$jar" --workdir "$work" "$@"
