package main

import (
	"errors"
	"net"
	"sync"
	"time"
)

// handoffListener is one listening socket that gRPC servers serve in
// turn: the starting server (health NOT_SERVING, Flight UNAVAILABLE) while
// the WAL replays, then the real one. The port stays open throughout, so
// that a client probing it during a long replay gets an answer rather than
// "connection refused", and the real server takes over without a gap.
//
// One goroutine accepts from the socket; each server reads its
// connections from a view (view), whose Close stops only that server.
type handoffListener struct {
	ln    net.Listener
	conns chan net.Conn
	done  chan struct{} // closed by Close
	// failed is closed when the socket fails; err says why.
	failed chan struct{}
	err    error
	pumped chan struct{} // closed when pump returns
	once   sync.Once
}

func newHandoffListener(ln net.Listener) *handoffListener {
	l := &handoffListener{ln: ln, conns: make(chan net.Conn), done: make(chan struct{}),
		failed: make(chan struct{}), pumped: make(chan struct{})}
	go l.pump()
	return l
}

// pump accepts connections and hands each to whichever view takes it.
func (l *handoffListener) pump() {
	defer close(l.pumped)
	var delay time.Duration
	for {
		c, err := l.ln.Accept()
		if err != nil {
			var te interface{ Temporary() bool }
			if errors.As(err, &te) && te.Temporary() {
				// Out of file descriptors, say: wait, as net/http and
				// gRPC do, rather than give up the port.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				select {
				case <-time.After(delay):
					continue
				case <-l.done:
					return
				}
			}
			l.err = err
			close(l.failed)
			return
		}
		delay = 0
		select {
		case l.conns <- c:
		case <-l.done:
			c.Close()
			return
		}
	}
}

// view is a net.Listener for one server over the shared socket.
func (l *handoffListener) view() net.Listener {
	return &listenerView{l: l, closed: make(chan struct{})}
}

func (l *handoffListener) Addr() net.Addr { return l.ln.Addr() }

// Close closes the socket and waits for the accepting goroutine.
func (l *handoffListener) Close() error {
	var err error
	l.once.Do(func() {
		close(l.done)
		err = l.ln.Close()
		<-l.pumped
	})
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

type listenerView struct {
	l      *handoffListener
	closed chan struct{}
	once   sync.Once
}

func (v *listenerView) Accept() (net.Conn, error) {
	select {
	case <-v.closed:
		return nil, net.ErrClosed
	default:
	}
	select {
	case c := <-v.l.conns:
		select {
		case <-v.closed:
			// Closed while the connection came: it is another server's
			// to serve (gRPC would drop it, and the client retry).
			v.offer(c)
			return nil, net.ErrClosed
		default:
			return c, nil
		}
	case <-v.closed:
		return nil, net.ErrClosed
	case <-v.l.done:
		return nil, net.ErrClosed
	case <-v.l.failed:
		return nil, v.l.err
	}
}

// offerWait bounds how long a closed view waits for another to take a
// connection it received as it closed: its server's stop waits for it.
const offerWait = 100 * time.Millisecond

// offer hands c to another view, or closes it (the client then connects
// again) if none takes it soon.
func (v *listenerView) offer(c net.Conn) {
	t := time.NewTimer(offerWait)
	defer t.Stop()
	select {
	case v.l.conns <- c:
	case <-v.l.done:
		c.Close()
	case <-t.C:
		c.Close()
	}
}

// Close stops this view's server from taking connections; the socket
// stays open for the others.
func (v *listenerView) Close() error {
	v.once.Do(func() { close(v.closed) })
	return nil
}

func (v *listenerView) Addr() net.Addr { return v.l.ln.Addr() }
