package flightsvc

import (
	"context"
	"net"

	"github.com/apache/arrow-go/v18/arrow/flight/session"
	"google.golang.org/grpc/peer"

	"github.com/apron-db/apron/auth"
)

// clientKey names the client a request comes from, for limits that one
// client must not exhaust for the others (open prepared statements): its
// session, when it sends the cookie of a session the server holds (a
// cookie is the client's to make up: one the server did not give is not
// an identity); else its connection (the peer's address and port: ADBC,
// the JDBC driver and arrow-go's client hold one gRPC connection per
// connection object). Limits per host (hostKey) bound what one machine,
// or one token, can get by opening connections. With authentication, the
// key starts with the token's id: sessions are bound to tokens, and no
// two tokens share a client.
func (s *SQLServer) clientKey(ctx context.Context) string {
	prefix := ""
	if p := auth.FromContext(ctx); p != nil {
		prefix = "token:" + p.ID() + "/"
	}
	if c, err := session.GetIncomingCookieByName(ctx, session.StatefulSessionCookieName); err == nil && c.Value != "" && s.sessions.holds(c.Value) {
		return prefix + "session:" + c.Value
	}
	return prefix + "peer:" + peerAddr(ctx)
}

// peerAddr is the address and port of the peer, "" if unknown.
func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// peerHost is the peer's address without the port: all connections from
// one host.
func peerHost(ctx context.Context) string {
	a := peerAddr(ctx)
	if h, _, err := net.SplitHostPort(a); err == nil {
		return h
	}
	return a
}
