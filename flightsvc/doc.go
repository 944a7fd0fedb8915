// Package flightsvc is Apron's Arrow Flight and Flight SQL gRPC service.
//
// Two layers:
//
//   - SQLServer implements arrow-go's flightsql.Server (embedding
//     flightsql.BaseServer, whose methods answer Unimplemented): bulk ingest
//     with CommandStatementIngest, SQL (statements, prepared statements,
//     INSERT updates) through the query engine, the metadata commands,
//     GetSqlInfo, GetXdbcTypeInfo, session options and CancelFlightInfo.
//   - Service is the flight.FlightServiceServer registered with gRPC. It
//     looks at the descriptor of a DoPut's first message, at GetFlightInfo
//     and GetSchema descriptors and at DoGet tickets: PATH descriptors
//     [database, table] and Apron's own tickets (prefix "apron:") are plain
//     Flight, served here; everything else goes to arrow-go's Flight SQL
//     adapter, which only understands Flight SQL commands.
//
// # SQL
//
// The current database (where unqualified table names resolve) is the
// "database" request header if sent, else the session option "schema"
// (SetSessionOptions; sessions are arrow-go's cookie-based stateful
// sessions, see session.go). A statement's GetFlightInfo prepares it (for
// its schema) and answers one endpoint whose ticket is a
// TicketStatementQuery holding JSON {sql, database, id}; DoGet runs it and
// streams DuckDB's batches through an unbuffered channel, cut to at most
// 2 MiB each. Prepared statements live in a handle map (idle expiry 1h,
// at most 10000) with the parameters last bound by DoPut.
//
// The package imports the query engine, so it builds only with the tag
// duckdb_arrow.
//
// Domain errors become gRPC status codes in one place: statusOf in
// status.go.
package flightsvc
