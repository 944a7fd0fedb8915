// Package flightsvc is Apron's Arrow Flight and Flight SQL gRPC service.
//
// Two layers:
//
//   - SQLServer implements arrow-go's flightsql.Server (embedding
//     flightsql.BaseServer, whose methods answer Unimplemented): bulk ingest
//     with CommandStatementIngest and the metadata commands.
//   - Service is the flight.FlightServiceServer registered with gRPC. It
//     looks at the descriptor of a DoPut's first message, at GetFlightInfo
//     and GetSchema descriptors and at DoGet tickets: PATH descriptors
//     [database, table] and Apron's own tickets (prefix "apron:") are plain
//     Flight, served here; everything else goes to arrow-go's Flight SQL
//     adapter, which only understands Flight SQL commands.
//
// Domain errors become gRPC status codes in one place: statusOf in
// status.go.
package flightsvc
