package main

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// fakeStream is a ServerStream with a context and nothing else.
type fakeStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (f *fakeStream) Context() context.Context     { return f.ctx }
func (f *fakeStream) SetHeader(metadata.MD) error  { return nil }
func (f *fakeStream) SendHeader(metadata.MD) error { return nil }

// TestCallGate: cancelAll cancels running reads, whose clients then get
// UNAVAILABLE even when the handler made nothing of it (a stream that just
// ends would pass for the whole result); new reads are refused; writes
// run on, and are counted.
func TestCallGate(t *testing.T) {
	g := newCallGate()
	doGet := &grpc.StreamServerInfo{FullMethod: "/" + flightService + "/DoGet"}
	doPut := &grpc.StreamServerInfo{FullMethod: "/" + flightService + "/DoPut"}
	ss := &fakeStream{ctx: context.Background()}

	started := make(chan struct{})
	result := make(chan error, 1)
	go func() {
		result <- g.stream(nil, ss, doGet, func(_ any, s grpc.ServerStream) error {
			close(started)
			<-s.Context().Done()
			return nil // as a query's stream that stops sending does
		})
	}()
	<-started
	writing := make(chan struct{})
	release := make(chan struct{})
	writeDone := make(chan error, 1)
	go func() {
		writeDone <- g.stream(nil, ss, doPut, func(_ any, s grpc.ServerStream) error {
			close(writing)
			<-release
			return s.Context().Err()
		})
	}()
	<-writing
	if n := g.othersInFlight(); n != 1 {
		t.Fatalf("%d other calls in flight, want the write", n)
	}
	if n := g.cancelAll(); n != 1 {
		t.Fatalf("cancelAll cancelled %d reads, want 1", n)
	}
	if err := <-result; status.Code(err) != codes.Unavailable {
		t.Fatalf("the cancelled read ended with %v, want UNAVAILABLE", err)
	}
	err := g.stream(nil, ss, doGet, func(any, grpc.ServerStream) error {
		t.Error("a read started after cancelAll")
		return nil
	})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("a read after cancelAll: %v, want UNAVAILABLE", err)
	}
	close(release)
	if err := <-writeDone; err != nil {
		t.Fatalf("the write was cancelled: %v", err)
	}
	if n := g.othersInFlight(); n != 0 {
		t.Fatalf("%d other calls in flight after the write", n)
	}
}
