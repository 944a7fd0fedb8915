"""The cost of a small query through each Python client, against the
floor server (bench/peer/floor: one constant row, no work) and Apron:

    go run ./bench/peer/floor &                # 127.0.0.1:8093
    python bench/peer/floor.py grpc://127.0.0.1:8093 grpc://127.0.0.1:8082

Per server: ADBC's DB-API with the same text each time (the statement
stays prepared), with a new text each time (close, prepare, GetFlightInfo,
DoGet), and a query ticket through pyarrow.flight (the floor server
answers one too); the calls interleaved as bench/peer does, p50 and p90 in
ms. Apron needs a table bench.cpu (run.sh's, or any)."""
import json
import sys
import time

import adbc_driver_flightsql.dbapi as flightsql
import pyarrow.flight as fl

SQL = "SELECT count(*) FROM bench.cpu"


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))] * 1e3


def measure(uri, n):
    conn = flightsql.connect(uri, autocommit=True)
    cur = conn.cursor()
    fc = fl.FlightClient(uri)
    ticket = fl.Ticket(json.dumps({"database": "bench", "sql_query": SQL}).encode())
    try:
        fc.do_get(ticket).read_all()
    except Exception:  # not Apron: FlightError, or ArrowInvalid of a ticket it cannot parse
        ticket = None
    lat = {"ADBC same text": [], "ADBC new text": [], "ticket": []}
    for i in range(n):
        t0 = time.perf_counter()
        cur.execute(SQL)
        cur.fetch_arrow_table()
        lat["ADBC same text"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        cur.execute(f"{SQL} -- {i}")
        cur.fetch_arrow_table()
        lat["ADBC new text"].append(time.perf_counter() - t0)
        cur.execute(SQL)  # the next same-text call finds it prepared
        cur.fetch_arrow_table()
        if ticket:
            t0 = time.perf_counter()
            fc.do_get(ticket).read_all()
            lat["ticket"].append(time.perf_counter() - t0)
    cur.close()
    conn.close()
    fc.close()
    print(uri + ": " + ", ".join(f"{k} p50 {pct(v, 50):.2f} p90 {pct(v, 90):.2f}" for k, v in lat.items() if v))


if __name__ == "__main__":
    for uri in sys.argv[1:] or ["grpc://127.0.0.1:8093"]:
        measure(uri, 1000)
