"""Apron from Python's ADBC Flight SQL driver: bulk ingest, a query, a
prepared query with a parameter, an INSERT, and metadata. Run by
TestPythonADBC with the server's address as the only argument; exits
non-zero with a message on the first wrong answer."""

import sys

import adbc_driver_flightsql
import adbc_driver_flightsql.dbapi as flightsql
import pyarrow as pa

uri = "grpc://" + sys.argv[1]
print(f"versions: adbc-driver-flightsql {adbc_driver_flightsql.__version__}, pyarrow {pa.__version__}")
n = 1000
times = pa.array([1_700_000_000_000_000_000 + i for i in range(n)], pa.timestamp("ns"))
table = pa.table({
    "time": times,
    "host": pa.array([f"h{i % 7}" for i in range(n)]),
    "usage": pa.array([i / 4 for i in range(n)], pa.float64()),
})


def check(what, got, want):
    if got != want:
        sys.exit(f"{what}: got {got!r}, want {want!r}")


with flightsql.connect(uri) as conn:
    with conn.cursor() as cur:
        written = cur.adbc_ingest("cpu", table, mode="create_append", db_schema_name="py")
        check("rows ingested", written, n)
        written = cur.adbc_ingest("cpu", table.slice(0, 10), mode="append", db_schema_name="py")
        check("rows appended", written, 10)
    conn.commit()

    with conn.cursor() as cur:
        # Python's DB-API driver prepares every statement.
        cur.execute("SELECT count(*) AS n, count(DISTINCT time) AS t, sum(usage) AS s FROM py.cpu")
        got = cur.fetch_arrow_table().to_pylist()[0]
        check("count", got["n"], n + 10)
        check("distinct ns times", got["t"], n)
        check("sum", got["s"], sum(i / 4 for i in range(n)) + sum(i / 4 for i in range(10)))

        cur.execute("SELECT count(*) AS n FROM py.cpu WHERE host = ?", parameters=("h3",))
        got = cur.fetch_arrow_table().to_pylist()[0]["n"]
        check("prepared with a parameter", got, sum(1 for i in range(n) if i % 7 == 3) + sum(1 for i in range(10) if i % 7 == 3))

        cur.execute("INSERT INTO py.cpu (time, host, usage) VALUES (TIMESTAMP_NS '2030-01-01 00:00:00.000000001', 'hx', 1.5)")
        check("rows inserted", cur.rowcount, 1)

        cur.execute("SELECT time, host FROM py.cpu WHERE host = 'hx'")
        rows = cur.fetch_arrow_table()
        check("time type", str(rows.schema.field("time").type), "timestamp[ns]")
        check("inserted row", rows.column("time").cast(pa.int64()).to_pylist(), [1_893_456_000_000_000_001])

    objs = conn.adbc_get_objects(depth="columns").read_all().to_pylist()
    check("catalog", [o["catalog_name"] for o in objs], ["apron"])
    schemas = {s["db_schema_name"]: s for s in objs[0]["catalog_db_schemas"]}
    tables = {t["table_name"]: t for t in schemas["py"]["db_schema_tables"]}
    check("columns", [c["column_name"] for c in tables["cpu"]["table_columns"]], ["time", "host", "usage"])
    check("table schema", conn.adbc_get_table_schema("cpu", db_schema_filter="py").names, ["time", "host", "usage"])

print("ok")
