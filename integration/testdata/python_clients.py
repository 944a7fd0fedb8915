"""Apron from the Python tools its users reach for, each as its users call
it: the ADBC Flight SQL DB-API driver (every ingest mode, parameters of
every type with ? and $1, executemany INSERT, get_info, get_objects,
get_table_schema), pandas (to_sql and read_sql over ADBC, naive and zoned
datetimes), polars (write_database and read_database over ADBC, strings
and Categoricals), pyarrow.flight (PATH DoPut, DoGet of buffered and of
persisted endpoints, a query ticket) and InfluxDB 3's Python client
(influxdb3-python, whose queries are query tickets). Run by TestPythonClients with the server's address
(a server with one-second segments) as the only argument; prints the
versions it ran and one line per check, "ok" last; exits non-zero with a
message on the first wrong answer."""

import datetime as dt
import importlib.metadata
import json
import os
import sys
import time

import adbc_driver_flightsql
import adbc_driver_flightsql.dbapi as flightsql
import adbc_driver_manager
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.flight as flight
from influxdb_client_3 import InfluxDBClient3

addr = sys.argv[1]
uri = "grpc://" + addr
Status = adbc_driver_manager.AdbcStatusCode
UTC = dt.timezone.utc

print(f"versions: adbc-driver-flightsql {adbc_driver_flightsql.__version__}, pandas {pd.__version__}, "
      f"polars {pl.__version__}, pyarrow {pa.__version__}, influxdb3-python {importlib.metadata.version('influxdb3-python')}, python {sys.version.split()[0]}, TZ={os.environ.get('TZ', '')}")


def check(what, got, want):
    if got != want:
        sys.exit(f"{what}: got {got!r}, want {want!r}")
    print(f"{what}: {got!r}")


def fails(what, fn, status, *parts):
    """fn() must raise an ADBC error of status whose message mentions parts."""
    try:
        fn()
    except adbc_driver_manager.Error as e:
        msg = str(e).lower()
        if e.status_code != status or any(p.lower() not in msg for p in parts):
            sys.exit(f"{what}: {e.status_code!r} {e}, want {status!r} mentioning {parts}")
        print(f"{what}: {e.status_code.name}: {str(e).splitlines()[0]}")
        return
    sys.exit(f"{what}: no error, want {status!r}")


def ns(t):
    """The nanoseconds since the epoch of an aware datetime."""
    return (t - dt.datetime(1970, 1, 1, tzinfo=UTC)) // dt.timedelta(microseconds=1) * 1000


t0 = dt.datetime(2026, 1, 5, 12, 0, 0, tzinfo=UTC)


def rows(n, start=0):
    return pa.table({
        "time": pa.array([ns(t0) + (start + i) * 1_000_000_000 for i in range(n)], pa.timestamp("ns")),
        "i": pa.array(list(range(start, start + n)), pa.int64()),
        "f": pa.array([(start + i) / 4 for i in range(n)], pa.float64()),
        "s": pa.array([f"s{(start + i) % 3}" for i in range(n)]),
        "b": pa.array([(start + i) % 2 == 0 for i in range(n)]),
        "bin": pa.array([bytes([start + i]) for i in range(n)], pa.binary()),
        "d": pa.array([dt.date(2026, 1, 1 + (start + i) % 28) for i in range(n)], pa.date32()),
    })


with flightsql.connect(uri, autocommit=True) as conn:
    # --- ADBC ingest: every mode.
    with conn.cursor() as cur:
        check("ingest create", cur.adbc_ingest("t", rows(10), mode="create", db_schema_name="py"), 10)
        fails("ingest create of an existing table", lambda: cur.adbc_ingest("t", rows(1), mode="create", db_schema_name="py"),
              Status.ALREADY_EXISTS, '"t"')
        check("ingest append", cur.adbc_ingest("t", rows(5, 10), mode="append", db_schema_name="py"), 5)
        fails("ingest append to a missing table", lambda: cur.adbc_ingest("nope", rows(1), mode="append", db_schema_name="py"),
              Status.NOT_FOUND, '"nope"')
        check("ingest create_append", cur.adbc_ingest("t", rows(5, 15), mode="create_append", db_schema_name="py"), 5)
        check("ingest create_append of a new table", cur.adbc_ingest("t2", rows(3), mode="create_append", db_schema_name="py"), 3)
        # replace needs DROP TABLE; a server that has it replaces the rows.
        try:
            n = cur.adbc_ingest("t2", rows(2, 100), mode="replace", db_schema_name="py")
            cur.execute("SELECT count(*) AS n FROM py.t2")
            check("ingest replace: the table holds the new rows only", (n, cur.fetchone()[0]), (2, 2))
        except adbc_driver_manager.Error as e:
            check("ingest replace (not supported)", e.status_code, Status.NOT_IMPLEMENTED)
    conn.commit()

    with conn.cursor() as cur:
        # --- Parameters of every type, with ? and with $1.
        for sql, params, want in [
            ("SELECT count(*) FROM py.t WHERE i >= ?", (15,), 5),
            ("SELECT count(*) FROM py.t WHERE i >= $1 AND i < $2", (5, 10), 5),
            ("SELECT count(*) FROM py.t WHERE f = ?", (2.5,), 1),
            ("SELECT count(*) FROM py.t WHERE s = $1", ("s1",), 7),
            ("SELECT count(*) FROM py.t WHERE b = ?", (True,), 10),
            ("SELECT count(*) FROM py.t WHERE bin = ?", (bytes([3]),), 1),
            ("SELECT count(*) FROM py.t WHERE d = ?", (dt.date(2026, 1, 4),), 1),
            ("SELECT count(*) FROM py.t WHERE time >= ?", (t0 + dt.timedelta(seconds=18),), 2),
            ("SELECT count(*) FROM py.t WHERE time >= $1", (dt.datetime(2026, 1, 5, 12, 0, 18),), 2),  # naive: UTC
            ("SELECT count(*) FROM py.t WHERE time >= ?",
             (dt.datetime(2026, 1, 5, 7, 0, 18, tzinfo=dt.timezone(dt.timedelta(hours=-5))),), 2),
            ("SELECT count(*) FROM py.t WHERE s = ? OR ? IS NULL", ("none", None), 20),
        ]:
            cur.execute(sql, parameters=params)
            check(f"{sql} {params!r}", cur.fetchone()[0], want)
        for value in [7, 2.5, "text", True, b"\x00\x01", dt.date(2026, 1, 5), None]:
            cur.execute("SELECT ? AS v", parameters=(value,))
            got = cur.fetchone()[0]
            # An untyped parameter comes back as a string unless DuckDB
            # typed it from the bound value.
            check(f"SELECT ? AS v with {value!r}", got in (value, None if value is None else str(value)), True)

        # --- executemany INSERT: one execution per row.
        cur.executemany("INSERT INTO py.t (time, i, s) VALUES (?, ?, ?)",
                        [(t0 + dt.timedelta(hours=1, seconds=k), 1000 + k, f"many{k}") for k in range(4)])
        cur.execute("SELECT list(i ORDER BY i), list(epoch_ns(time) ORDER BY i) FROM py.t WHERE i >= 1000")
        ids, times = cur.fetchone()
        check("executemany rows", ids, [1000, 1001, 1002, 1003])
        check("executemany times", times, [ns(t0) + (3600 + k) * 1_000_000_000 for k in range(4)])

    # --- Metadata.
    info = conn.adbc_get_info()
    check("get_info vendor_name", info["vendor_name"], "Apron")
    check("get_info has vendor_version", bool(info.get("vendor_version")), True)
    objs = conn.adbc_get_objects(depth="tables", db_schema_filter="py").read_all().to_pylist()
    tables = sorted(t["table_name"] for s in objs[0]["catalog_db_schemas"] for t in s["db_schema_tables"])
    check("get_objects tables", tables, ["t", "t2"])
    sc = conn.adbc_get_table_schema("t", db_schema_filter="py")
    check("get_table_schema", [f"{f.name}:{f.type}" for f in sc],
          ["time:timestamp[ns]", "i:int64", "f:double", "s:string", "b:bool", "bin:binary", "d:date32[day]"])

    # --- pandas: to_sql and read_sql over the ADBC connection, naive and
    # zoned datetimes (a zoned one is stored as its UTC instant).
    naive = pd.DataFrame({
        "time": pd.to_datetime(["2026-01-05 12:00:00.000000001", "2026-01-05 12:00:01"], format="ISO8601"),
        "host": ["a", "b"],
        "v": [1.5, None],
    })
    check("pandas naive datetime dtype", str(naive["time"].dtype), "datetime64[ns]")
    check("pandas to_sql (create)", naive.to_sql("pd", conn, schema="py", if_exists="fail", index=False), 2)
    zoned = pd.DataFrame({
        "time": pd.DatetimeIndex([
            pd.Timestamp("2026-01-05 13:00:02", tz="Europe/Paris"),
            pd.Timestamp("2026-01-05 07:00:03", tz="America/New_York").tz_convert("Europe/Paris"),
        ]),
        "host": ["c", "d"],
        "v": [3.0, 4.0],
    })
    check("pandas to_sql (append, zoned)", zoned.to_sql("pd", conn, schema="py", if_exists="append", index=False), 2)
    conn.commit()
    df = pd.read_sql("SELECT time, host, v FROM py.pd ORDER BY time", conn)
    check("pandas read_sql time dtype", str(df["time"].dtype), "datetime64[ns]")
    check("pandas read_sql times (UTC)", [str(t) for t in df["time"]],
          ["2026-01-05 12:00:00.000000001", "2026-01-05 12:00:01", "2026-01-05 12:00:02", "2026-01-05 12:00:03"])
    check("pandas read_sql hosts", list(df["host"]), ["a", "b", "c", "d"])
    check("pandas read_sql null", bool(pd.isna(df["v"][1])), True)
    with conn.cursor() as cur:
        # read_sql(params=...) is not implemented by pandas for ADBC: the
        # cursor binds them.
        cur.execute("SELECT host FROM py.pd WHERE v > ? ORDER BY host", (2.0,))
        check("pandas through the cursor with a parameter", list(cur.fetch_df()["host"]), ["c", "d"])

    # --- polars: write_database and read_database over the ADBC
    # connection; polars sends strings as string_view and Categoricals as
    # dictionaries of them.
    frame = pl.DataFrame({
        "time": pl.datetime_range(dt.datetime(2026, 1, 5, 12), dt.datetime(2026, 1, 5, 12, 0, 5), "1s", eager=True, time_unit="ns"),
        "host": [f"host-with-a-long-name-{k % 2}" for k in range(6)],
        "region": pl.Series(["eu", "us", "eu", "us", "eu", "ap"], dtype=pl.Categorical),
        "v": [float(k) for k in range(6)],
    })
    check("polars write_database (create)", frame.write_database("py.pl", connection=conn, if_table_exists="fail", engine="adbc"), 6)
    check("polars write_database (append)", frame.head(2).write_database("py.pl", connection=conn, if_table_exists="append", engine="adbc"), 2)
    conn.commit()
    got = pl.read_database("SELECT time, host, region, v FROM py.pl ORDER BY time, v", connection=conn)
    check("polars read_database schema", [f"{k}:{v}" for k, v in got.schema.items()],
          ["time:Datetime(time_unit='ns', time_zone=None)", "host:String", "region:String", "v:Float64"])
    check("polars read_database rows", got.height, 8)
    check("polars regions", got.group_by("region").len().sort("region").rows(), [("ap", 1), ("eu", 4), ("us", 3)])
    check("polars first time", got["time"][0], dt.datetime(2026, 1, 5, 12))

# --- pyarrow.flight: PATH DoPut, then DoGet of buffered and persisted
# endpoints (the server persists one-second segments).
client = flight.FlightClient(uri)
desc = flight.FlightDescriptor.for_path("py", "fl")
old = pa.table({"time": pa.array([ns(t0)] * 3, pa.timestamp("ns")), "k": pa.array([1, 2, 3], pa.int64())})
writer, reader = client.do_put(desc, old.schema)
writer.write_table(old)
writer.done_writing()
reader.read()  # the PutResult of the batch: durable
writer.close()


def endpoints():
    info = client.get_flight_info(desc)
    # A persisted file's endpoint carries an apron.v1.ParquetReference.
    return [e for e in info.endpoints if not e.app_metadata], [e for e in info.endpoints if e.app_metadata]


deadline = time.monotonic() + 60
while not endpoints()[1]:
    if time.monotonic() > deadline:
        sys.exit("no persisted endpoint after 60 s")
    time.sleep(0.2)
writer, reader = client.do_put(desc, old.schema)
writer.write_table(pa.table({"time": pa.array([ns(t0)] * 2, pa.timestamp("ns")), "k": pa.array([4, 5], pa.int64())}))
writer.done_writing()
reader.read()
writer.close()
buffered, persisted = endpoints()
got = {}
for kind, eps in (("buffered", buffered), ("persisted", persisted)):
    got[kind] = sorted(k for e in eps for k in client.do_get(e.ticket).read_all().column("k").to_pylist())
# The second batch may itself be persisted by now: all rows, each once.
check("pyarrow DoGet of every endpoint", sorted(got["buffered"] + got["persisted"]), [1, 2, 3, 4, 5])
check("pyarrow a persisted endpoint holds the first batch", set([1, 2, 3]) <= set(got["persisted"]), True)

# --- A query ticket (InfluxDB 3's JSON form): one DoGet runs the query,
# unqualified names in the ticket's database.
def ticket(db, sql, **more):
    return flight.Ticket(json.dumps({"database": db, "sql_query": sql, **more}).encode())


got = client.do_get(ticket("py", "SELECT k FROM fl ORDER BY k")).read_all()
check("pyarrow query ticket", got.column("k").to_pylist(), [1, 2, 3, 4, 5])
try:
    client.do_get(ticket("py", "SHOW MEASUREMENTS", query_type="influxql")).read_all()
    sys.exit("an InfluxQL query ticket was answered")
except pa.ArrowInvalid as e:  # INVALID_ARGUMENT, in pyarrow
    check("pyarrow InfluxQL ticket refused", "answers SQL only" in str(e), True)
client.close()

# --- InfluxDB 3's Python client (influxdb3-python) queries Apron as it
# queries InfluxDB 3: a bearer token (ignored here: no authentication) and
# a query ticket, to a pyarrow Table and to pandas.
c3 = InfluxDBClient3(host="http://" + addr, token="unused", database="py")
check("influxdb3-python query", c3.query("SELECT k FROM fl ORDER BY k").column("k").to_pylist(), [1, 2, 3, 4, 5])
check("influxdb3-python query to pandas", c3.query("SELECT count(*) AS n FROM fl", mode="pandas")["n"].tolist(), [5])
c3.close()

print("ok", flush=True)
# As auth_python.py: leave without the interpreter's teardown, where gRPC
# threads now and then abort the process after "ok".
os._exit(0)
