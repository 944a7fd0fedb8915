"""Apron's authentication and TLS from Python: the ADBC Flight SQL driver
(bearer header, username/password) and pyarrow.flight (Basic login,
bearer header), over plaintext and TLS, and the refusals with the
exception classes Python users catch. Run by TestAuthPython, which passes
everything in the environment:

  APRON_ADDR, APRON_ADMIN, APRON_READ_TOKEN (may read database a only),
  APRON_READ_TOKEN_ID, APRON_ROWS (rows of a.t): the plaintext server;
  APRON_TLS_ADDR, APRON_TLS_ADMIN, APRON_TLS_CA (PEM file of the CA),
  APRON_TLS_ROWS: the TLS server.

Prints one line per check and "ok" last; exits non-zero with a message on
the first wrong answer."""

import json
import os
import sys

import adbc_driver_flightsql
import adbc_driver_flightsql.dbapi as flightsql
import adbc_driver_manager
import pyarrow.flight as flight

env = os.environ
addr, admin, read_tok = env["APRON_ADDR"], env["APRON_ADMIN"], env["APRON_READ_TOKEN"]
read_id, rows = env["APRON_READ_TOKEN_ID"], int(env["APRON_ROWS"])
tls_addr, tls_admin, tls_rows = env["APRON_TLS_ADDR"], env["APRON_TLS_ADMIN"], int(env["APRON_TLS_ROWS"])
with open(env["APRON_TLS_CA"], "rb") as f:
    ca_pem = f.read()

AUTH_HEADER = adbc_driver_flightsql.DatabaseOptions.AUTHORIZATION_HEADER.value
USERNAME = adbc_driver_manager.DatabaseOptions.USERNAME.value
PASSWORD = adbc_driver_manager.DatabaseOptions.PASSWORD.value
TLS_ROOT_CERTS = adbc_driver_flightsql.DatabaseOptions.TLS_ROOT_CERTS.value
Status = adbc_driver_manager.AdbcStatusCode


def check(what, got, want):
    if got != want:
        sys.exit(f"{what}: got {got!r}, want {want!r}")
    print(f"{what}: {got!r}")


def fails(what, fn, exc, *parts):
    """fn() must raise exc (a class or tuple) whose message mentions parts;
    returns the exception."""
    try:
        fn()
    except exc as e:
        msg = str(e).lower()
        for p in parts:
            if p.lower() not in msg:
                sys.exit(f"{what}: {type(e).__name__} {e!s} does not mention {p!r}")
        print(f"{what}: {type(e).__name__}: {str(e).splitlines()[0]}")
        return e
    except Exception as e:
        sys.exit(f"{what}: raised {type(e).__name__} {e!s}, want {exc}")
    sys.exit(f"{what}: no error, want {exc}")


def adbc_count(uri, db_kwargs, sql="SELECT count(*) AS n FROM a.t"):
    with flightsql.connect(uri, db_kwargs=db_kwargs) as conn:
        with conn.cursor() as cur:
            cur.execute(sql)
            return cur.fetch_arrow_table().to_pylist()[0]["n"]


def adbc_status(what, fn, status, *parts):
    e = fails(what, fn, adbc_driver_manager.Error, *parts)
    check(what + " status", e.status_code, status)


uri = "grpc://" + addr

# --- ADBC: a bearer header, and username/password (a Basic handshake).
check("adbc bearer count", adbc_count(uri, {AUTH_HEADER: "Bearer " + read_tok}), rows)
check("adbc username/password count", adbc_count(uri, {USERNAME: "anyone", PASSWORD: read_tok}), rows)
adbc_status("adbc no credentials", lambda: adbc_count(uri, {}), Status.UNAUTHENTICATED, "no credentials")
adbc_status("adbc wrong password", lambda: adbc_count(uri, {USERNAME: "anyone", PASSWORD: "wrong"}),
            Status.UNAUTHENTICATED, "not an apron token")
adbc_status("adbc read token on database b",
            lambda: adbc_count(uri, {AUTH_HEADER: "Bearer " + read_tok}, "SELECT count(*) AS n FROM b.t"),
            Status.UNAUTHORIZED, '"b"')

# --- pyarrow.flight: Basic login answers the bearer header pair.
client = flight.FlightClient(uri)
pair = client.authenticate_basic_token(b"anyone", admin.encode())
# (Compared, not printed: the output shows no token.)
check("basic login answers authorization: Bearer <the token>",
      (pair[0].lower(), pair[1] == b"Bearer " + admin.encode()), (b"authorization", True))
opts = flight.FlightCallOptions(headers=[pair])
actions = {a.type for a in client.list_actions(options=opts)}
check("apron.token.list offered", "apron.token.list" in actions, True)
listed = [json.loads(r.body.to_pybytes()) for r in client.do_action("apron.token.list", options=opts)]
check("token.list has the read token", read_id in [t["id"] for t in listed], True)
# The pair is the bearer token itself: a read token logged in reads a.t.
read_pair = client.authenticate_basic_token(b"u", read_tok.encode())
read_opts = flight.FlightCallOptions(headers=[read_pair])
info = client.get_flight_info(flight.FlightDescriptor.for_path("a", "t"), options=read_opts)
got = sum(client.do_get(ep.ticket, options=read_opts).read_all().num_rows for ep in info.endpoints)
check("pyarrow PATH DoGet rows", got, rows)

fails("pyarrow no credentials", lambda: list(client.list_actions()), flight.FlightUnauthenticatedError,
      "no credentials")
fails("pyarrow wrong password", lambda: client.authenticate_basic_token(b"u", b"wrong"),
      flight.FlightUnauthenticatedError, "not an apron token")
fails("pyarrow read token on an admin action",
      lambda: list(client.do_action("apron.token.list", options=read_opts)), flight.FlightUnauthorizedError)
client.close()

# --- TLS: pyarrow trusting the CA (PEM bytes), with a bearer header.
tls_uri = "grpc+tls://" + tls_addr
tls_hdr = flight.FlightCallOptions(headers=[(b"authorization", b"Bearer " + tls_admin.encode())])
tls_client = flight.FlightClient(tls_uri, tls_root_certs=ca_pem)
info = tls_client.get_flight_info(flight.FlightDescriptor.for_path("a", "t"), options=tls_hdr)
got = sum(tls_client.do_get(ep.ticket, options=tls_hdr).read_all().num_rows for ep in info.endpoints)
check("pyarrow TLS PATH DoGet rows", got, tls_rows)
pair = tls_client.authenticate_basic_token(b"anyone", tls_admin.encode())
check("pyarrow TLS basic login answers the token", pair[1] == b"Bearer " + tls_admin.encode(), True)
fails("pyarrow TLS no credentials", lambda: list(tls_client.list_actions()), flight.FlightUnauthenticatedError)
tls_client.close()
untrusting = flight.FlightClient(tls_uri)
fails("pyarrow TLS without the CA", lambda: list(untrusting.list_actions(options=tls_hdr)),
      flight.FlightUnavailableError, "certificate verify failed")
untrusting.close()

# --- TLS: ADBC trusting the CA (PEM text).
check("adbc TLS bearer count",
      adbc_count(tls_uri, {AUTH_HEADER: "Bearer " + tls_admin, TLS_ROOT_CERTS: ca_pem.decode()}), tls_rows)
check("adbc TLS username/password count",
      adbc_count(tls_uri, {USERNAME: "x", PASSWORD: tls_admin, TLS_ROOT_CERTS: ca_pem.decode()}), tls_rows)
adbc_status("adbc TLS without the CA", lambda: adbc_count(tls_uri, {AUTH_HEADER: "Bearer " + tls_admin}),
            Status.IO, "certificate")

print("ok", flush=True)
# Every check has passed: leave without the interpreter's teardown, where
# the gRPC threads of the clients above now and then abort the process
# (SIGABRT after "ok", seen under load).
os._exit(0)
