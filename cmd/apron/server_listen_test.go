package main

import (
	"errors"
	"net"
	"testing"
	"time"
)

// TestHandoffListener: connections go to whichever view accepts; a closed
// view takes none, while the socket stays open for the other, so a client
// is never refused across the handoff.
func TestHandoffListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newHandoffListener(ln)
	defer l.Close()
	first, second := l.view(), l.view()
	accepted := func(v net.Listener) chan net.Conn {
		ch := make(chan net.Conn, 1)
		go func() {
			c, err := v.Accept()
			if err != nil {
				close(ch)
				return
			}
			ch <- c
		}()
		return ch
	}
	dial := func() net.Conn {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		return c
	}
	c1 := dial()
	defer c1.Close()
	got := <-accepted(first)
	if got == nil {
		t.Fatal("the first view accepted nothing")
	}
	got.Close()
	// Handoff: the first view closes, the second takes the next client.
	pending := accepted(first)
	first.Close()
	if c, ok := <-pending; ok {
		t.Fatalf("a closed view accepted %v", c.RemoteAddr())
	}
	if _, err := first.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept on a closed view: %v", err)
	}
	c2 := dial()
	defer c2.Close()
	select {
	case got := <-accepted(second):
		if got == nil {
			t.Fatal("the second view accepted nothing")
		}
		got.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("the second view took no connection")
	}
	// Closing the socket ends every view.
	pending = accepted(second)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-pending; ok {
		t.Fatal("a view accepted after the socket closed")
	}
	if _, err := net.Dial("tcp", l.Addr().String()); err == nil {
		t.Fatal("the socket still accepts after Close")
	}
}
