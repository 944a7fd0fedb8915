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
//     adapter, which only understands Flight SQL commands. A DoGet ticket
//     that opens a JSON object is a query ticket (queryticket.go: SQL in
//     one call, InfluxDB 3's form), turned into the Flight SQL statement
//     ticket of its query and handed to the adapter, so that both take one
//     path through admission, permissions and limits.
//
// # Ingest memory
//
// The gRPC server decodes FlightData with bodyCodec: protobuf, read from
// the HTTP/2 frames gRPC received it in (not joined into one buffer
// first), with the data_body (the Arrow buffers of a batch) copied from
// the frames into memory from a buffer.Recycler instead of a new
// allocation; its frames come from framePool, which does not zero them
// (gRPC's pool does, a second pass over every byte). Ingest streams (Flight SQL
// bulk ingest, which Service serves itself as arrow-go's adapter would,
// and PATH DoPuts) are read with putReader, which hands the IPC reader
// each body as a reference-counted buffer of that Recycler: once the last
// array over a body is released (the write path copies what it keeps into
// the WAL record and the buffer's chunks) it is reused for the next
// message, warm, instead of the kernel faulting in fresh pages for every
// batch. Other DoPuts go through the adapter; their bodies are garbage as
// gRPC's own would be.
//
// A bulk ingest that fails reads (and drops) the rest of the client's
// stream before it answers (drainPut): the client then gets the error from
// the result it reads, rather than an EOF on a send.
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
// 2 MiB each; batches of 8192 rows or more go as they are, smaller ones
// are joined. Prepared statements live in a handle map (idle expiry 1h,
// at most 10000) with the parameters last bound by DoPut. A result
// schema's IPC encodings (in FlightInfo, in CreatePreparedStatement's
// answer, as a stream's first message) are kept by the schema's content
// and reused (schemacache.go), and a stream's batches are encoded one by
// one after it (doget.go).
//
// The package imports the query engine, so it builds only with the tag
// duckdb_arrow.
//
// # Authentication
//
// With a verifier (Config.Auth), the first interceptor of every Flight
// call (auth.go; not of the health service) turns the call's
// "authorization" header (Bearer <token>, or Basic user:token) into an
// auth.Principal in the call's context, or refuses it UNAUTHENTICATED
// before anything else runs. Handshake answers a Basic login with the
// bearer token in its response headers. Handlers authorize by the
// Principal: writes need write on the target (ingest checks again at
// every batch, so a revoked token stops mid-stream), plain reads read on
// the table's database, SQL is authorized by the query engine from
// DuckDB's parse; metadata lists only readable databases. Tickets,
// prepared statements and sessions record the token id they were made
// for, and refuse any other (errNotOwner). The token actions
// (apron.token.*, tokens.go) are admin only. Per-client limits count by
// token when there is one.
//
// Domain errors become gRPC status codes in one place: statusOf in
// status.go.
//
// # Request log and metrics
//
// The first interceptor of every call, before authentication
// (requestlog.go), gives it a request id (the client's x-request-id if
// it is a short token, else 16 hex digits; requestid.go), answers it in
// the response header (and trailer, on failure) and puts a call record
// in the context (callinfo.go). It classifies the call by its request
// (the descriptor, ticket, first DoPut message or action: the Flight SQL
// command kind) and counts the Arrow bytes each way; the authenticator
// adds the token id, the handlers the database, the SQL and the rows sent
// and received. When the call ends it is counted (rpc_metrics.go) and
// logged: at debug always, at info when slow (Config.SlowQueryThreshold)
// or failed for the client's reason, at warn or error when failed for the
// server's. A refused call's line stays at debug: the authenticator logs
// the refusal itself, rate-limited.
package flightsvc
