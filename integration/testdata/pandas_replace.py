"""Replacing a table's content from Python: ADBC bulk ingest with
mode="replace", and pandas DataFrame.to_sql(if_exists="replace") over an
ADBC connection. Run by TestPythonPandasReplace with the server's address
as the only argument; exits non-zero with a message on the first wrong
answer."""

import sys

import adbc_driver_flightsql.dbapi as flightsql
import pandas as pd
import pyarrow as pa

uri = "grpc://" + sys.argv[1]
t0 = 1_700_000_000_000_000_000


def check(what, got, want):
    if got != want:
        sys.exit(f"{what}: got {got!r}, want {want!r}")


def ns(n):
    return pa.array([t0 + i for i in range(n)], pa.timestamp("ns"))


with flightsql.connect(uri) as conn:
    with conn.cursor() as cur:
        old = pa.table({"time": ns(100), "host": [f"h{i % 3}" for i in range(100)], "usage": pa.array([i / 4 for i in range(100)], pa.float64())})
        check("rows created", cur.adbc_ingest("cpu", old, mode="create", db_schema_name="pd"), 100)
        # Other columns, usage of another type.
        new = pa.table({"time": ns(10), "usage": [f"u{i}" for i in range(10)], "n": pa.array(range(10), pa.int64())})
        check("rows replaced", cur.adbc_ingest("cpu", new, mode="replace", db_schema_name="pd"), 10)
        # A table that does not exist yet.
        check("rows of a new table", cur.adbc_ingest("fresh", new, mode="replace", db_schema_name="pd"), 10)
    conn.commit()

    with conn.cursor() as cur:
        cur.execute("SELECT count(*) AS n, min(n) AS lo, max(n) AS hi, min(usage) AS u FROM pd.cpu")
        got = cur.fetch_arrow_table().to_pylist()[0]
        check("replaced content", got, {"n": 10, "lo": 0, "hi": 9, "u": "u0"})
    check("replaced columns", conn.adbc_get_table_schema("cpu", db_schema_filter="pd").names, ["time", "usage", "n"])
    check("new table's columns", conn.adbc_get_table_schema("fresh", db_schema_filter="pd").names, ["time", "usage", "n"])

    # pandas: to_sql(if_exists="replace") on a new table, then on it again
    # with other columns. (pandas runs DROP TABLE, then ingests in mode
    # create; both work.)
    df = pd.DataFrame({
        "time": pd.Series([t0, t0 + 1, t0 + 2]).astype("datetime64[ns]"),
        "city": ["Oslo", "Lima", "Pune"],
        "temp": [1.5, 22.0, 31.25],
    })
    check("to_sql into a new table", df.to_sql("weather", conn, schema="pd", if_exists="replace", index=False), 3)
    df2 = pd.DataFrame({
        "time": pd.Series([t0 + 10, t0 + 11]).astype("datetime64[ns]"),
        "station": [7, 8],
    })
    check("to_sql replacing it", df2.to_sql("weather", conn, schema="pd", if_exists="replace", index=False), 2)
    got = pd.read_sql("SELECT station FROM pd.weather ORDER BY time", conn)
    check("replaced by pandas", got["station"].tolist(), [7, 8])
    check("columns replaced by pandas", conn.adbc_get_table_schema("weather", db_schema_filter="pd").names, ["time", "station"])
    check("to_sql replacing pd.cpu", df2.to_sql("cpu", conn, schema="pd", if_exists="replace", index=False), 2)
    check("pd.cpu replaced by pandas", pd.read_sql("SELECT count(*) AS n FROM pd.cpu", conn)["n"].tolist(), [2])

print("ok")
