// Apron from Node: the Flight SQL client @lakehouse-rs/flight-sql-client
// (a napi binding of the Rust arrow-flight client) with apache-arrow to
// read its results. Connect with a token and a database header, a query
// (exact nanosecond times, the result's column metadata), the metadata
// calls, and errors. Run by TestNodeClient with the server's host, port
// and admin token; NODE_PATH points at the node_modules test.sh installs.
// Prints the versions it ran and one line per check, "ok" last; exits
// non-zero with a message on the first wrong answer.
"use strict";

const fs = require("fs");
const path = require("path");
const { createFlightSqlClient } = require("@lakehouse-rs/flight-sql-client");
const { tableFromIPC } = require("apache-arrow");

const [host, port, token] = process.argv.slice(2);

function version(pkg) {
  let dir = path.dirname(require.resolve(pkg));
  while (!fs.existsSync(path.join(dir, "package.json"))) dir = path.dirname(dir);
  return JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8")).version;
}

function check(what, got, want) {
  const g = JSON.stringify(got, (k, v) => (typeof v === "bigint" ? v.toString() : v));
  const w = JSON.stringify(want, (k, v) => (typeof v === "bigint" ? v.toString() : v));
  if (g !== w) {
    console.error(`${what}: got ${g}, want ${w}`);
    process.exit(1);
  }
  console.log(`${what}: ${g}`);
}

async function rejects(what, fn) {
  try {
    await fn();
  } catch (e) {
    return e;
  }
  console.error(`${what}: no error`);
  process.exit(1);
}

async function main() {
  console.log(`versions: node ${process.version}, @lakehouse-rs/flight-sql-client ${version("@lakehouse-rs/flight-sql-client")}, apache-arrow ${version("apache-arrow")}`);
  const opts = { host, port: Number(port), tls: false, token, headers: [{ key: "database", value: "node" }] };
  const client = await createFlightSqlClient(opts);

  // A query: unqualified names resolve in the database header's database.
  const t = tableFromIPC(await client.query("SELECT tag, count(*) AS n, min(time) AS first FROM t GROUP BY tag ORDER BY tag LIMIT 2"));
  check("rows", t.toArray().map((r) => [r.tag, Number(r.n)]), [["tag0", 3], ["tag1", 3]]);
  // apache-arrow reads a Timestamp<NANOSECOND> as a Number of
  // milliseconds; the exact nanoseconds are in the column's data (a
  // BigInt64Array per batch; the client's first batch may be empty).
  check("time type", String(t.schema.fields[2].type), "Timestamp<NANOSECOND>");
  const first = t.getChild("first").data.find((d) => d.length > 0);
  check("exact nanoseconds", first.values[first.offset], 1704164645000000000n);
  // The column that is a table's column names it (what JDBC and DBeaver read).
  const md = t.schema.fields[0].metadata;
  check("column metadata", [md.get("ARROW:FLIGHT:SQL:SCHEMA_NAME"), md.get("ARROW:FLIGHT:SQL:TABLE_NAME")], ["node", "t"]);

  // Metadata.
  check("catalogs", tableFromIPC(await client.getCatalogs()).toArray().map((r) => r.catalog_name), ["apron"]);
  check("schemas", tableFromIPC(await client.getDbSchemas({ dbSchemaFilterPattern: "no%" })).toArray().map((r) => r.db_schema_name), ["node"]);
  const tables = tableFromIPC(await client.getTables({ dbSchemaFilterPattern: "node", includeSchema: true, tableTypes: ["TABLE"] }));
  check("tables", tables.toArray().map((r) => [r.db_schema_name, r.table_name, r.table_type, r.table_schema.length > 0]), [["node", "t", "TABLE", true]]);
  check("tables without a catalog", tableFromIPC(await client.getTables({ catalog: "" })).numRows, 0);

  // Errors: the client reports its own text for a statement the server
  // refuses, not the server's message (client 0.0.10).
  const e = await rejects("bad SQL", () => client.query("SELECT nope FROM t"));
  const carries = /nope/.test(e.message);
  console.log(`bad SQL: ${e.code}: ${e.message}${carries ? "" : " (the client does not pass on the server's message)"}`);
  if (!carries && e.message !== "failed to prepare statement") {
    check("bad SQL message", e.message, "failed to prepare statement");
  }
  const bad = await createFlightSqlClient({ ...opts, token: "apron_wrong" });
  const e2 = await rejects("wrong token", () => bad.query("SELECT 1"));
  console.log(`wrong token: ${e2.code}: ${e2.message}`);

  console.log("ok");
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
