#!/usr/bin/env python3
"""Side-by-side benchmark of Apron against QuestDB (see README.md here).

Each round starts both servers afresh (new data dirs, free ports), loads
the same CPU-like table into both, runs every measure on Apron and on
QuestDB in turn (interleaved: query by query, writer test by writer test,
the system that goes first alternating from round to round), and stops
them. The table printed at the end is the median over the rounds of each
round's figure, with the ratio; the raw figures of every round follow it
and go to --out as JSON.

run.sh installs what this needs and calls it; it can also be run by hand:

    python peer.py --apron-bin ./apron --questdb-jar questdb-9.2.2.jar --quick
"""

import argparse
import json
import multiprocessing as mp
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.flight as pa_flight

DAY0_NS = 1767225600 * 10**9  # 2026-01-01T00:00:00Z
DAY_NS = 86400 * 10**9
HOSTS = 200
REGIONS = ["us-east-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-south-1"]  # loadgen.Regions
FLOATS = ["usage_user", "usage_system", "usage_iowait", "usage_idle", "load1"]
DB = "bench"

# Both systems' tables: loadgen.Schema (time, host, region, five float64,
# an int64 counter). QuestDB's tags are SYMBOLs, its time the designated
# timestamp of a WAL table partitioned by day.
QUESTDB_DDL = ("CREATE TABLE IF NOT EXISTS {t} (time TIMESTAMP, host SYMBOL, region SYMBOL, "
               + ", ".join(f"{c} DOUBLE" for c in FLOATS)
               + ", requests LONG) TIMESTAMP(time) PARTITION BY DAY WAL")
APRON_DDL = ("CREATE TABLE IF NOT EXISTS {t} (time TIMESTAMP_NS, host VARCHAR, region VARCHAR, "
             + ", ".join(f"{c} DOUBLE" for c in FLOATS) + ", requests BIGINT)")


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- data

def make_table(rows, seed=1):
    """rows rows over one day, 200 hosts round-robin (so each host has a
    row every 200*day/rows: 3.456 s at 5M rows, 173 rows in 10 minutes)."""
    rng = np.random.default_rng(seed)
    i = np.arange(rows, dtype=np.int64)
    step = DAY_NS // rows
    step -= step % 1000  # whole microseconds: QuestDB's TIMESTAMP keeps µs
    h = i % HOSTS
    hosts = pa.DictionaryArray.from_arrays(pa.array(h.astype(np.int32)), pa.array([f"host-{k}" for k in range(HOSTS)]))
    regions = pa.DictionaryArray.from_arrays(pa.array((h % len(REGIONS)).astype(np.int32)), pa.array(REGIONS))
    user = rng.random(rows) * 60
    system = rng.random(rows) * 20
    iowait = rng.random(rows) * 5
    cols = {
        "time": pa.array(DAY0_NS + i * step, pa.timestamp("ns")),
        "host": hosts,
        "region": regions,
        "usage_user": user,
        "usage_system": system,
        "usage_iowait": iowait,
        "usage_idle": 100 - user - system - iowait,
        "load1": rng.random(rows) * 8,
        "requests": i,
    }
    return pa.table(cols)


def plain_strings(t):
    """t with its dictionary columns as plain strings (what Apron stores)."""
    return pa.table({n: (c.cast(pa.string()) if pa.types.is_dictionary(c.type) else c)
                     for n, c in zip(t.column_names, t.columns)})


def last_time_ns(rows):
    step = DAY_NS // rows
    step -= step % 1000
    return DAY0_NS + (rows - 1) * step


def ts_literal(ns):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ns // 10**9)) + ".%06dZ" % ((ns % 10**9) // 1000)


# ------------------------------------------------------------- servers

class Server:
    name = "?"

    def rss(self):
        """Resident set of the server process, bytes (VmRSS)."""
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            return 0
        return 0

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.logf.close()


class Apron(Server):
    name = "Apron"

    def __init__(self, binary, workdir, extra_flags):
        self.port = free_port()
        self.dir = os.path.join(workdir, "apron")
        os.makedirs(self.dir)
        self.logpath = os.path.join(workdir, "apron.log")
        self.logf = open(self.logpath, "w")
        cmd = [binary, "serve", "--addr", f"127.0.0.1:{self.port}", "--metrics-addr", f"127.0.0.1:{free_port()}",
               "--data-dir", self.dir, "--without-auth"] + extra_flags
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=subprocess.STDOUT)
        self.uri = f"grpc://127.0.0.1:{self.port}"
        try:
            self._setup()
        except BaseException:
            super().stop()
            raise

    def _setup(self):
        deadline = time.monotonic() + 120
        while True:
            with open(self.logpath) as f:
                if "apron ready" in f.read():
                    break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"apron did not start: see {self.logpath}")
            time.sleep(0.05)
        import adbc_driver_flightsql.dbapi as flightsql
        self.conn = flightsql.connect(self.uri, autocommit=True, db_kwargs={
            "adbc.flight.sql.client_option.with_max_msg_size": str(64 << 20),
        })
        self.cur = self.conn.cursor()
        self.flight = pa_flight.FlightClient(self.uri)  # for ticket_query
        self.update(f"CREATE SCHEMA IF NOT EXISTS {DB}")
        for t in ("cpu", "writes", "cpu_bg"):
            self.update(APRON_DDL.format(t=f"{DB}.{t}"))

    def update(self, sql):
        self.cur.execute(sql)

    def query(self, sql):
        """Runs sql and returns the result as an Arrow table."""
        self.cur.execute(sql)
        return self.cur.fetch_arrow_table()

    def ticket_query(self, sql):
        """Runs sql in one DoGet of a query ticket (pyarrow.flight, the
        JSON ticket InfluxDB 3's clients send) and returns its result."""
        tkt = pa_flight.Ticket(json.dumps({"database": DB, "sql_query": sql}).encode())
        return self.flight.do_get(tkt).read_all()

    def bulk_ingest(self, table, name="cpu"):
        self.cur.adbc_ingest(name, table.to_reader(max_chunksize=100_000), mode="append", db_schema_name=DB)

    def visible_rows(self, name):
        return self.query(f"SELECT count(*) FROM {DB}.{name}").column(0)[0].as_py()

    def stop(self):
        try:
            self.cur.close()
            self.conn.close()
            self.flight.close()
        except Exception:
            pass
        super().stop()


class QuestDB(Server):
    name = "QuestDB"

    def __init__(self, jar, workdir, commit_mode, java_opts):
        self.http = free_port()
        self.pg = free_port()
        root = os.path.join(workdir, "questdb")
        os.makedirs(root)
        self.logpath = os.path.join(workdir, "questdb.log")
        self.logf = open(self.logpath, "w")
        env = dict(os.environ,
                   QDB_HTTP_NET_BIND_TO=f"127.0.0.1:{self.http}",
                   QDB_HTTP_MIN_NET_BIND_TO=f"127.0.0.1:{free_port()}",
                   QDB_PG_NET_BIND_TO=f"127.0.0.1:{self.pg}",
                   QDB_LINE_TCP_NET_BIND_TO=f"127.0.0.1:{free_port()}",
                   QDB_LINE_UDP_BIND_TO=f"127.0.0.1:{free_port()}",
                   QDB_TELEMETRY_ENABLED="false",
                   QDB_CAIRO_COMMIT_MODE=commit_mode)
        cmd = ["java"] + java_opts + ["-p", jar, "-m", "io.questdb/io.questdb.ServerMain", "-d", root]
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=subprocess.STDOUT, env=env)
        try:
            self._setup()
        except BaseException:
            super().stop()
            raise

    def _setup(self):
        deadline = time.monotonic() + 120
        while True:
            try:
                self.exec("SELECT 1")
                break
            except Exception:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"questdb did not start: see {self.logpath}")
                time.sleep(0.2)
        import psycopg
        self.conn = psycopg.connect(f"host=127.0.0.1 port={self.pg} user=admin password=quest dbname=qdb",
                                    autocommit=True)
        self.cur = self.conn.cursor(binary=True)
        for t in ("cpu", "writes", "cpu_bg"):
            self.exec(QUESTDB_DDL.format(t=t))

    def exec(self, sql):
        url = f"http://127.0.0.1:{self.http}/exec?" + urllib.parse.urlencode({"query": sql})
        with urllib.request.urlopen(url, timeout=60) as r:
            out = json.loads(r.read())
        if "error" in out:
            raise RuntimeError(f"questdb: {sql}: {out['error']}")
        return out

    def query(self, sql):
        """Runs sql over the PostgreSQL wire protocol (psycopg, binary
        results) and returns the rows."""
        self.cur.execute(sql)
        return self.cur.fetchall()

    def export_csv(self, sql, schema):
        """Runs sql over HTTP /exp (CSV) and parses it into an Arrow table."""
        url = f"http://127.0.0.1:{self.http}/exp?" + urllib.parse.urlencode({"query": sql})
        with urllib.request.urlopen(url, timeout=600) as r:
            return pacsv.read_csv(r, convert_options=pacsv.ConvertOptions(column_types=schema))

    def bulk_ingest(self, df, name="cpu", chunk=1_000_000):
        """One ILP/HTTP request (one transaction, acknowledged once
        committed) per chunk rows: bigger requests were faster, up to the
        server's 1 GiB request limit."""
        from questdb.ingress import Sender
        conf = f"http::addr=127.0.0.1:{self.http};auto_flush=off;request_timeout=600000;max_buf_size=1000000000;"
        with Sender.from_conf(conf) as s:
            for off in range(0, len(df), chunk):
                s.dataframe(df.iloc[off:off + chunk], table_name=name, at="time")
                s.flush()

    def visible_rows(self, name):
        return self.exec(f"SELECT count() FROM {name}")["dataset"][0][0]

    def stop(self):
        try:
            self.conn.close()
        except Exception:
            pass
        super().stop()


# ------------------------------------------------------------- writers

def writer_proc(system, addr, table, writer, batch_rows, start, seconds, ready_q, out_q):
    """One writer (its own process): 1,000-row batches one at a time, each
    sent once the previous one is acknowledged, for seconds from the time
    the parent puts in start (a shared double) once every writer has said
    on ready_q that it is connected. Puts its acknowledgement latencies
    (seconds) on out_q."""
    rng = np.random.default_rng(writer)
    h = (np.arange(batch_rows) + writer) % HOSTS
    user = rng.random(batch_rows) * 60
    tmpl = {
        "host": [f"host-{k}" for k in h],
        "region": [REGIONS[k % len(REGIONS)] for k in h],
        "usage_user": user, "usage_system": rng.random(batch_rows) * 20,
        "usage_iowait": rng.random(batch_rows) * 5, "usage_idle": 100 - user,
        "load1": rng.random(batch_rows) * 8,
    }
    lat = []
    errors = []
    try:
        _write(system, addr, table, writer, batch_rows, start, seconds, tmpl, lat, ready_q)
    except Exception as e:  # reported by the parent; the latencies so far still count
        errors.append(f"{system} writer {writer}: {type(e).__name__}: {e}")
    out_q.put((lat, errors))


def _wait_start(start, ready_q):
    """Says it is ready, then waits for the parent to set the start time;
    returns it."""
    ready_q.put(True)
    while start.value == 0:
        time.sleep(0.001)
    while time.time() < start.value:
        time.sleep(0.0005)
    return start.value


def _write(system, addr, table, writer, batch_rows, start, seconds, tmpl, lat, ready_q):
    import pandas as pd
    offsets = np.arange(batch_rows, dtype=np.int64) * 1000
    counter = 0
    if system == "Apron":
        import pyarrow.flight as flight
        cols = {"host": pa.array(tmpl["host"]), "region": pa.array(tmpl["region"])}
        cols.update({c: pa.array(tmpl[c]) for c in FLOATS})
        client = flight.FlightClient(addr)
        schema = pa.schema([("time", pa.timestamp("ns")), ("host", pa.string()), ("region", pa.string())]
                           + [(c, pa.float64()) for c in FLOATS] + [("requests", pa.int64())])
        put, acks = client.do_put(flight.FlightDescriptor.for_path(DB, table), schema)
        start_at = _wait_start(start, ready_q)
        while time.time() < start_at + seconds:
            now = time.time_ns() // 1000 * 1000
            t0 = time.perf_counter()
            batch = pa.record_batch([pa.array(now + offsets, pa.timestamp("ns")), cols["host"], cols["region"]]
                                    + [cols[c] for c in FLOATS]
                                    + [pa.array(np.arange(counter, counter + batch_rows, dtype=np.int64))],
                                    schema=schema)
            put.write_batch(batch)
            acks.read()  # the PutResult: the batch is durable
            lat.append(time.perf_counter() - t0)
            counter += batch_rows
        put.done_writing()
        put.close()
        client.close()
    else:
        from questdb.ingress import Sender
        df = pd.DataFrame(tmpl)
        df["host"] = df["host"].astype("category")
        df["region"] = df["region"].astype("category")
        with Sender.from_conf(f"http::addr={addr};auto_flush=off;") as s:
            start_at = _wait_start(start, ready_q)
            while time.time() < start_at + seconds:
                now = time.time_ns() // 1000 * 1000
                t0 = time.perf_counter()
                df["time"] = pd.to_datetime(now + offsets, unit="ns")
                df["requests"] = np.arange(counter, counter + batch_rows, dtype=np.int64)
                s.dataframe(df, table_name=table, at="time")
                s.flush()  # one HTTP request: answered once the WAL commit is done
                lat.append(time.perf_counter() - t0)
                counter += batch_rows


def run_writers(server, table, writers, seconds, batch_rows=1000, during=None, sample_rss=False):
    """Runs writers writer processes against server for seconds; during,
    if given, is called once they have started (in this process) and may
    run longer. Returns (latencies, peak rss, rows)."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    ready = ctx.Queue()
    start = ctx.Value("d", 0.0, lock=False)
    addr = server.uri if server.name == "Apron" else f"127.0.0.1:{server.http}"
    procs = [ctx.Process(target=writer_proc, args=(server.name, addr, table, w, batch_rows, start, seconds, ready, q))
             for w in range(writers)]
    for p in procs:
        p.start()
    # Start-up (imports, connecting) is over in every writer before any
    # measures: on 2 busy cores it takes seconds.
    for _ in procs:
        ready.get(timeout=300)
    start_at = time.time() + 0.2
    start.value = start_at
    while time.time() < start_at:
        time.sleep(0.01)
    peak = 0
    extra = None
    if during is not None:
        extra = during()
    while time.time() < start_at + seconds:
        if sample_rss:
            peak = max(peak, server.rss())
        time.sleep(0.1)
    lat = []
    for _ in procs:
        got, errors = q.get(timeout=300)
        lat += got
        for e in errors:
            log("WARNING:", e)
    if sample_rss:
        peak = max(peak, server.rss())
    for p in procs:
        p.join()
    return lat, peak, len(lat) * batch_rows, extra


# -------------------------------------------------------------- measures

def pct(xs, p):
    return float(np.percentile(np.array(xs), p)) if xs else float("nan")


def timed(f):
    t0 = time.perf_counter()
    r = f()
    return time.perf_counter() - t0, r


def nrows(r):
    return r.num_rows if isinstance(r, pa.Table) else len(r)


class Queries:
    """The query measures: SQL per system, run interleaved."""

    def __init__(self, rows):
        end = last_time_ns(rows) + 1000  # just past the last row
        since = end - 10 * 60 * 10**9
        apron_since = ts_literal(since)[:-1].replace("T", " ")
        self.apron = {
            "agg": f"SELECT host, time_bucket(INTERVAL 1 MINUTE, time) AS minute, avg(usage_user) AS usage_user "
                   f"FROM {DB}.cpu GROUP BY ALL",
            "export": f"SELECT * FROM {DB}.cpu",
            "count": f"SELECT count(*) FROM {DB}.cpu",
            "point": f"SELECT * FROM {DB}.cpu WHERE host = '{{host}}' AND time >= '{apron_since}'::TIMESTAMP_NS",
            "last": f"SELECT host, max(time) AS time, arg_max(region, time) AS region, "
                    + ", ".join(f"arg_max({c}, time) AS {c}" for c in FLOATS + ["requests"])
                    + f" FROM {DB}.cpu GROUP BY host",
        }
        self.questdb = {
            "agg": "SELECT time, host, avg(usage_user) AS usage_user FROM cpu SAMPLE BY 1m",
            "export": "SELECT * FROM cpu",
            "count": "SELECT count() FROM cpu",
            "point": f"SELECT * FROM cpu WHERE host = '{{host}}' AND time >= '{ts_literal(since)}'",
            "last": "SELECT * FROM cpu LATEST ON time PARTITION BY host",
        }


# The queries also measured through a query ticket.
TICKET_KINDS = ("count", "point", "last")


def measure_queries(a, q, rows, reps, order, lvc_query, res, kinds=("count", "point", "last", "agg", "export"),
                    questdb_export_pg=False):
    """Each query of kinds reps[k] times on each system, alternating call
    by call, after warm-up runs."""
    Q = Queries(rows)
    csv_schema = {"time": pa.timestamp("us", "UTC"), "host": pa.string(), "region": pa.string(),
                  **{c: pa.float64() for c in FLOATS}, "requests": pa.int64()}
    runners = {
        "Apron": lambda k, sql: a.query(sql),
        "QuestDB": lambda k, sql: q.query(sql),
    }
    for kind in kinds:
        lat = {"Apron": [], "QuestDB": [], "QuestDB-csv": [], "Apron-lvc": [], "Apron-ticket": [], "Apron-lvc-ticket": []}
        counts = {}
        n = reps[kind]
        warm = 1 if kind in ("agg", "export") else 2
        for i in range(n + warm):
            host = f"host-{(i * 37) % HOSTS}"
            for who in order:
                if kind == "export" and who == "QuestDB" and not questdb_export_pg:  # CSV only
                    who = "QuestDB-csv"
                    d, r = timed(lambda: q.export_csv("cpu", csv_schema))
                    if i >= warm:
                        lat[who].append(d)
                    counts.setdefault(who, []).append(r.num_rows)
                    continue
                sql = (Q.apron if who == "Apron" else Q.questdb)[kind].replace("{host}", host)
                d, r = timed(lambda: runners[who](kind, sql))
                if i >= warm:
                    lat[who].append(d)
                counts.setdefault(who, []).append(nrows(r) if kind != "count" else
                                                  (r.column(0)[0].as_py() if isinstance(r, pa.Table) else r[0][0]))
                if kind == "export" and who == "QuestDB":
                    d, r = timed(lambda: q.export_csv("cpu", csv_schema))
                    if i >= warm:
                        lat["QuestDB-csv"].append(d)
                    counts.setdefault("QuestDB-csv", []).append(r.num_rows)
                # The small queries again in one call: a query ticket.
                if kind in TICKET_KINDS and who == "Apron":
                    d, r = timed(lambda: a.ticket_query(sql))
                    if i >= warm:
                        lat["Apron-ticket"].append(d)
                    counts.setdefault("Apron-ticket", []).append(
                        nrows(r) if kind != "count" else r.column(0)[0].as_py())
                if kind == "last" and who == "Apron" and lvc_query:
                    d, r = timed(lambda: a.query(lvc_query))
                    if i >= warm:
                        lat["Apron-lvc"].append(d)
                    counts.setdefault("Apron-lvc", []).append(r.num_rows)
                    d, r = timed(lambda: a.ticket_query(lvc_query))
                    if i >= warm:
                        lat["Apron-lvc-ticket"].append(d)
                    counts.setdefault("Apron-lvc-ticket", []).append(r.num_rows)
        # The same answer from both, call by call (rows, or the count).
        if len({tuple(v) for v in counts.values()}) != 1:
            raise RuntimeError(f"{kind}: the systems disagree on the result size: {counts}")
        log(f"{kind}: result sizes {sorted(set(counts['Apron']))} from both")
        for who, xs in lat.items():
            if xs:
                res[f"{kind}.p50.{who}"] = pct(xs, 50) * 1e3
                res[f"{kind}.p99.{who}"] = pct(xs, 99) * 1e3
        log(f"{kind}: " + ", ".join(f"{w} p50 {pct(xs, 50) * 1e3:.2f} ms" for w, xs in lat.items() if xs))


def apron_persisting(a):
    """Makes Apron close its open segment (a DROP TABLE rolls it over) so
    the persister writes it as Parquet; returns when it rolled over."""
    a.update(f"CREATE TABLE {DB}.roll (time TIMESTAMP_NS, x DOUBLE)")
    a.cur.adbc_ingest("roll", pa.table({"time": pa.array([DAY0_NS], pa.timestamp("ns")), "x": [1.0]}),
                      mode="append", db_schema_name=DB)
    t0 = time.perf_counter()
    a.update(f"DROP TABLE {DB}.roll")
    return t0


def wait_apron_persisted(a, t0, timeout=300):
    while time.perf_counter() - t0 < timeout:
        r = a.query("SELECT count(*) FROM system.segments WHERE state = 'closed'")
        if r.column(0)[0].as_py() == 0:
            return time.perf_counter() - t0
        time.sleep(0.1)
    return float("nan")


def wait_visible(server, name, want, t0, timeout=600):
    while time.perf_counter() - t0 < timeout:
        if server.visible_rows(name) >= want:
            return time.perf_counter() - t0
        time.sleep(0.05)
    raise RuntimeError(f"{server.name}: {name} has fewer than {want} rows after {timeout} s")


def one_round(args, rnd, table_arrow, table_plain, df):
    order = ["Apron", "QuestDB"] if rnd % 2 == 0 else ["QuestDB", "Apron"]
    res = {"loadavg1.start": os.getloadavg()[0]}
    work = tempfile.mkdtemp(prefix=f"peer-r{rnd}-", dir=args.workdir)
    servers = {}
    try:
        servers["Apron"] = Apron(args.apron_bin, work, args.apron_flag)
        servers["QuestDB"] = QuestDB(args.questdb_jar, work, args.questdb_commit_mode, args.java_opt)
        a, q = servers["Apron"], servers["QuestDB"]
        if args.apron_lvc_create:
            a.update(args.apron_lvc_create)
        rows = table_plain.num_rows

        # Bulk ingest: one client each, acknowledged = durable.
        for who in order:
            s = servers[who]
            t0 = time.perf_counter()
            if who == "Apron":
                s.bulk_ingest(table_plain)
            else:
                s.bulk_ingest(df)
            d = time.perf_counter() - t0
            res[f"ingest.rows_s.{who}"] = rows / d
            vis = wait_visible(s, "cpu", rows, t0)
            res[f"ingest_visible.rows_s.{who}"] = rows / vis
            log(f"{who}: bulk ingest {rows / d / 1e6:.2f}M rows/s acknowledged, {rows / vis / 1e6:.2f}M rows/s queryable")

        if "queries" in args.measures:
            measure_queries(a, q, rows, args.reps, order, args.apron_lvc_query, res,
                            questdb_export_pg=args.questdb_export_pg)

        # One writer, nothing else going on.
        for who in (order if "writers" in args.measures else []):
            lat, _, _, _ = run_writers(servers[who], "writes", 1, args.writer_seconds)
            res[f"w1.p50.{who}"] = pct(lat, 50) * 1e3
            res[f"w1.p99.{who}"] = pct(lat, 99) * 1e3
            log(f"{who}: 1 writer idle p50 {pct(lat, 50) * 1e3:.2f} ms p99 {pct(lat, 99) * 1e3:.2f} ms ({len(lat)} batches)")

        # One writer while the server moves a 5M-row table into its
        # long-term storage: Apron persists the segment holding cpu as
        # Parquet; QuestDB's WAL apply job turns a fresh bulk load of the
        # same rows (into cpu_bg) into its partitions.
        for who in (order if "writers" in args.measures else []):
            s = servers[who]
            if who == "Apron":
                during = lambda: apron_persisting(a)  # noqa: E731
            else:
                def during():
                    t0 = time.perf_counter()
                    q.bulk_ingest(df, "cpu_bg")
                    return t0
            lat, _, _, t0 = run_writers(s, "writes", 1, args.persist_seconds, during=during)
            if who == "Apron":
                busy = wait_apron_persisted(a, t0)
            else:
                busy = wait_visible(q, "cpu_bg", rows, t0)
            res[f"w1busy.p50.{who}"] = pct(lat, 50) * 1e3
            res[f"w1busy.p99.{who}"] = pct(lat, 99) * 1e3
            res[f"w1busy.window_s.{who}"] = busy
            log(f"{who}: 1 writer busy p50 {pct(lat, 50) * 1e3:.2f} ms p99 {pct(lat, 99) * 1e3:.2f} ms; "
                f"background work took {busy:.1f} s of the {args.persist_seconds} s")

        # The same queries on Apron now that cpu is persisted (Parquet).
        if "queries" in args.measures and "writers" in args.measures:
            sub = {}
            measure_queries(a, q, rows, {k: max(3, v // 2) for k, v in args.reps.items()}, order,
                            args.apron_lvc_query, sub, kinds=("count", "point", "last", "agg"))
            for k, v in sub.items():
                if ".Apron" in k:
                    res[k.replace(".Apron", ".Apron-persisted")] = v

        # 16 writers, peak RSS of the server while they run.
        for who in (order if "writers" in args.measures else []):
            s = servers[who]
            lat, peak, wrote, _ = run_writers(s, "writes", args.writers, args.writers_seconds, sample_rss=True)
            res[f"w16.p50.{who}"] = pct(lat, 50) * 1e3
            res[f"w16.p99.{who}"] = pct(lat, 99) * 1e3
            res[f"w16.rows_s.{who}"] = wrote / args.writers_seconds
            res[f"w16.rss_gb.{who}"] = peak / 1e9
            log(f"{who}: {args.writers} writers p99 {pct(lat, 99) * 1e3:.2f} ms, {wrote / args.writers_seconds / 1e3:.0f}k rows/s, "
                f"peak RSS {peak / 1e9:.2f} GB")
        res["loadavg1.end"] = os.getloadavg()[0]
    finally:
        for s in servers.values():
            s.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return res


# --------------------------------------------------------------- report

def fmt(v, unit):
    if v != v:
        return "n/a"
    if unit == "rows/s":
        return f"{v / 1e6:.2f}M"
    if unit == "GB":
        return f"{v:.2f} GB"
    if v >= 1000:
        return f"{v:,.0f} ms"
    return f"{v:.1f} ms" if v >= 10 else f"{v:.2f} ms"


def verdict(av, qv, higher_better):
    if av != av or qv != qv or av <= 0 or qv <= 0:
        return ""
    r = av / qv if higher_better else qv / av
    x = r if r >= 1 else 1 / r
    x = f"{x:.2f}" if x < 1.5 else f"{x:.1f}"
    if r >= 1:
        return f"Apron {x}x ahead"
    return f"**QuestDB {x}x ahead**"


def report(rounds, args):
    keys = sorted({k for r in rounds for k in r})
    med = {k: statistics.median([r[k] for r in rounds if k in r]) for k in keys}

    def g(k):
        return med.get(k, float("nan"))

    w = args.writers
    lines = [
        ("bulk ingest, durable ack (rows/s)", "ingest.rows_s", "rows/s", True),
        ("bulk ingest, until queryable (rows/s)", "ingest_visible.rows_s", "rows/s", True),
        ("1-minute average per host over the day", "agg.p50", "ms", False),
        ("export of all rows to Arrow", "export.p50", "ms", False),
        ("`count(*)` p50", "count.p50", "ms", False),
        ("one host, last 10 minutes, p50", "point.p50", "ms", False),
        ("one host, last 10 minutes, p99", "point.p99", "ms", False),
        ("last row per host (Apron `arg_max … GROUP BY host`, QuestDB `LATEST ON`) p50", "last.p50", "ms", False),
        ("one writer, 1,000-row batches, ack p99, idle server", "w1.p99", "ms", False),
        (f"one writer, ack p99, while {args.rows / 1e6:g}M rows move to storage (Apron persist, QuestDB WAL apply)",
         "w1busy.p99", "ms", False),
        (f"{w} writers, 1,000-row batches, ack p99", "w16.p99", "ms", False),
        (f"{w} writers, rows/s acknowledged", "w16.rows_s", "rows/s", True),
        (f"peak RSS, {w} writers × 1,000-row batches for {args.writers_seconds:g} s (after the table)", "w16.rss_gb", "GB", False),
    ]
    out = ["| measure | Apron | QuestDB | |", "|---|---|---|---|"]
    for label, key, unit, hb in lines:
        av, qv = g(f"{key}.Apron"), g(f"{key}.QuestDB")
        if key == "export.p50":  # the faster of the paths measured (HTTP /exp CSV, psycopg)
            qv = min((v for v in (qv, g("export.p50.QuestDB-csv")) if v == v), default=float("nan"))
        out.append(f"| {label} | {fmt(av, unit)} | {fmt(qv, unit)} | {verdict(av, qv, hb)} |")
    if "last.p50.Apron-lvc" in med:
        av, qv = g("last.p50.Apron-lvc"), g("last.p50.QuestDB")
        out.append(f"| last row per host, Apron last-value cache p50 | {fmt(av, 'ms')} | {fmt(qv, 'ms')} | {verdict(av, qv, False)} |")
    for kind, label in (("count", "`count(*)`"), ("point", "one host, last 10 minutes"), ("last", "last row per host"),
                        ("agg", "1-minute average per host")):
        k = f"{kind}.p50.Apron-persisted"
        if k in med:
            out.append(f"| {label} p50, Apron after the table is persisted (Parquet) | {fmt(med[k], 'ms')} | "
                       f"{fmt(g(f'{kind}.p50.QuestDB'), 'ms')} | {verdict(med[k], g(f'{kind}.p50.QuestDB'), False)} |")
    # The small queries through a query ticket (pyarrow.flight, one call).
    for key, label, quest in (("count.p50", "`count(*)` p50", "count.p50"),
                              ("point.p50", "one host, last 10 minutes, p50", "point.p50"),
                              ("point.p99", "one host, last 10 minutes, p99", "point.p99"),
                              ("last.p50", "last row per host p50", "last.p50"),
                              ("last.p50.Apron-lvc", "last row per host, last-value cache p50", "last.p50"),
                              ("count.p50.Apron-persisted", "`count(*)` p50, persisted", "count.p50"),
                              ("point.p50.Apron-persisted", "one host, last 10 minutes p50, persisted", "point.p50"),
                              ("last.p50.Apron-persisted", "last row per host p50, persisted", "last.p50"),
                              ("last.p50.Apron-persisted-lvc", "last row per host, last-value cache p50, persisted", "last.p50")):
        k = (key if ".Apron" in key else key + ".Apron") + "-ticket"
        if k in med:
            qv = g(f"{quest}.QuestDB")
            out.append(f"| {label}, Apron through a query ticket (pyarrow.flight) | {fmt(med[k], 'ms')} | "
                       f"{fmt(qv, 'ms')} | {verdict(med[k], qv, False)} |")
    table = "\n".join(out)
    raw = ["", f"Raw figures, one column per round ({len(rounds)} rounds; the table gives their medians):", "",
           "| figure | " + " | ".join(f"r{i + 1}" for i in range(len(rounds))) + " |",
           "|---|" + "---|" * len(rounds)]
    for k in keys:
        raw.append(f"| {k} | " + " | ".join(("%.4g" % r[k]) if k in r else "" for r in rounds) + " |")
    return table, "\n".join(raw), med


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--apron-bin", default=os.environ.get("APRON_BIN", "apron"))
    p.add_argument("--questdb-jar", default="")
    p.add_argument("--rows", type=int, default=5_000_000, help="rows of the table (also for --report-from's labels)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="200k rows, 1 round, few repetitions, short writer runs: a smoke run")
    p.add_argument("--writers", type=int, default=16)
    p.add_argument("--writer-seconds", type=float, default=10)
    p.add_argument("--persist-seconds", type=float, default=15)
    p.add_argument("--writers-seconds", type=float, default=15)
    p.add_argument("--questdb-commit-mode", default="sync", choices=["sync", "async", "nosync"],
                   help="QuestDB's cairo.commit.mode: sync (the default here) fsyncs each commit before it is acknowledged")
    p.add_argument("--questdb-export-pg", action="store_true",
                   help="export from QuestDB over the PostgreSQL wire protocol too (psycopg fetchall: Python tuples, "
                        "not Arrow), besides HTTP /exp CSV parsed into Arrow")
    p.add_argument("--apron-flag", action="append", default=[], help="an extra flag for apron serve (repeatable)")
    p.add_argument("--java-opt", action="append", default=[], help="an extra JVM option for QuestDB (repeatable)")
    p.add_argument("--apron-lvc-create", default=os.environ.get("APRON_LVC_CREATE", ""),
                   help="SQL that creates Apron's last-value cache on bench.cpu, run before the load")
    p.add_argument("--apron-lvc-query", default=os.environ.get("APRON_LVC_QUERY", ""),
                   help="SQL that reads the last row per host from Apron's last-value cache")
    p.add_argument("--workdir", default=None, help="where the servers' data dirs go (default: $TMPDIR)")
    p.add_argument("--keep", action="store_true", help="keep the data dirs and logs")
    p.add_argument("--out", default="", help="write the medians and every round's raw figures here as JSON")
    p.add_argument("--measures", default="queries,writers",
                   help="what to measure besides the bulk ingest: queries, writers or both (comma-separated)")
    p.add_argument("--report-from", action="append", default=[],
                   help="print the table of a JSON written by --out, and run nothing; given again, the figures of "
                        "the later file replace the earlier one's, round by round (e.g. a --measures writers rerun)")
    args = p.parse_args()
    if args.report_from:
        rounds, heads = [], []
        for k, path in enumerate(args.report_from):
            with open(path) as f:
                saved = json.load(f)
            heads.append(f"{path}: " + saved.get("head", ""))
            for i, r in enumerate(saved["rounds"]):
                if k > 0:
                    r = {(f"{key}.run{k + 1}" if key.startswith("loadavg1.") else key): v for key, v in r.items()}
                if i < len(rounds):
                    rounds[i].update(r)
                else:
                    rounds.append(r)
        table, raw, _ = report(rounds, args)
        print("\n".join(heads) + "\n\n" + table + "\n" + raw)
        return
    if args.quick:
        args.rows = min(args.rows, 200_000)
        args.rounds = 1
        args.writer_seconds = args.persist_seconds = args.writers_seconds = 4
        args.writers = min(args.writers, 4)
    big = args.rows >= 1_000_000
    args.reps = {"count": 200, "point": 200, "last": 20 if big else 100, "agg": 10 if big else 30, "export": 3 if big else 10}
    if args.quick:
        args.reps = {"count": 20, "point": 20, "last": 10, "agg": 3, "export": 2}

    if not args.questdb_jar:
        p.error("--questdb-jar is required")
    version = subprocess.run([args.apron_bin, "version"], capture_output=True, text=True).stdout.strip()
    log(f"apron: {version}")
    log(f"building the table: {args.rows:,} rows")
    table_arrow = make_table(args.rows)
    table_plain = plain_strings(table_arrow)
    df = table_arrow.to_pandas()  # host, region: Categorical, which the questdb client sends as SYMBOLs
    rounds = []
    for r in range(args.rounds):
        log(f"round {r + 1} of {args.rounds} (first: {'Apron' if r % 2 == 0 else 'QuestDB'})")
        rounds.append(one_round(args, r, table_arrow, table_plain, df))
        if args.out:  # after every round, so that a failed later round loses only itself
            with open(args.out, "w") as f:
                json.dump({"rounds": rounds}, f, indent=1)
    table, raw, med = report(rounds, args)
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    head = (f"{args.rows:,} rows (1 day, {HOSTS} hosts, 9 columns), {args.rounds} round(s), medians; "
            f"{os.cpu_count()} CPUs ({cpu}), {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB, "
            f"{platform.system()} {platform.release()}; QuestDB 9.2.2 cairo.commit.mode={args.questdb_commit_mode}; "
            f"apron: {version.splitlines()[0] if version else args.apron_bin}")
    print(head + "\n\n" + table + "\n" + raw)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"head": head, "medians": med, "rounds": rounds}, f, indent=1)


if __name__ == "__main__":
    main()
