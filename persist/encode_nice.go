package persist

import (
	"runtime"
	"slices"
	"sync"
	"time"
)

// While the encoding is bound (Config.BoundEncoding: writes come in and
// memory is plentiful), bounding it to one core fewer than the machine's
// leaves the Go scheduler a P for a write's goroutines (encode_slots.go),
// but the kernel still shares the cores between the encoder's thread and
// the threads of a write's acknowledgement (gRPC, the WAL's commit, the
// buffer): a woken thread may wait for the encoder to use its time slice,
// several times an ack. So the bound work also runs on a thread whose
// nice value is encodeNice: the kernel then prefers a woken thread of the
// server to it, and gives the encoder what the others leave, which,
// while memory is plentiful, is all persistence needs. Past that (the
// memory a persist frees is what lets writes go on) encoding runs at the
// server's priority on every core, as before.
//
// One writer of 1,000-row batches (apron bench write, one batch in
// flight) while 5M rows persisted, 2 cores, three runs each, interleaved,
// ack p99 over the 14 s and the p99s of the seconds of the persist:
//   - client and server in one session: 3.97-4.34 ms (seconds 2.3-5.3)
//     against 4.74-5.19 (2.7-6.6) at the server's priority;
//   - the server in a session of its own (setsid: the kernel's autogroups
//     then share the cores between client and server first): 4.57-4.96 ms
//     (3.7-6.8) against 5.26-5.92 (4.6-8.8).
//
// The persist took as long (8.6-9.6 s against 8.5-9.2 in one session):
// one writer leaves a core free most of the time. Nice 19 did no better
// than 10. In the peer benchmark (bench/peer, a pyarrow writer, two runs
// each) the line moved within its noise: 7.75 and 5.63 ms against 5.82
// and 5.91.
//
// An unprivileged process may raise a thread's nice value but not lower
// it again (RLIMIT_NICE), so the bound work runs on goroutines of their
// own that lock their threads and end without unlocking them: the Go
// runtime then ends the thread instead of giving it back to the pool
// (runtime.LockOSThread), and a thread it starts from a locked one is
// made by its template thread, not cloned from this one. Such a worker
// takes one call after another (about 20 µs a hand-off) and ends once it
// has had none for loweredIdle. A thread for each call was tried first:
// the persist took 11.1-11.4 s instead of 8.6-9.6, and the p99s did not
// move (making and ending a thread costs about 50 µs, and a new thread's
// first slices at nice 10 come late).
const encodeNice = 10

// loweredIdle is how long a lowered worker waits for another call before
// it ends: longer than the gaps between a file's batches (after a longer
// one, between files, a thread is made again: about 50 µs), short enough
// that a server at rest keeps no such thread, and that the goroutine leak
// checks of the packages' tests (goleak, which waits about 0.4 s) do not
// find one left by their last persist.
const loweredIdle = 100 * time.Millisecond

// lowered is the pool of lowered workers: the process's, like the
// threads it lowers.
var lowered loweredPool

// loweredPool hands calls to lowered workers, starting one when none is
// idle. A worker says it is idle before it returns its call's result, so
// that a caller that makes calls one after another (a persist's batches)
// finds it again instead of starting another.
type loweredPool struct {
	mu   sync.Mutex
	idle []*loweredWorker
}

type loweredWorker struct {
	calls chan loweredCall // capacity 1: a caller that took the worker from idle never waits to hand it a call
}

type loweredCall struct {
	fn   func() error
	done chan<- error
}

// runLowered runs fn on a thread of lower priority (lowerThread), where
// the system allows it, and waits for it; elsewhere it runs fn here.
func runLowered(fn func() error) error {
	if !lowerThreadSupported {
		return fn()
	}
	done := make(chan error, 1)
	lowered.run(loweredCall{fn, done})
	return <-done
}

func (p *loweredPool) run(c loweredCall) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		w.calls <- c
		return
	}
	p.mu.Unlock()
	w := &loweredWorker{calls: make(chan loweredCall, 1)}
	w.calls <- c
	go p.work(w)
}

// work runs w's calls on a lowered thread until it has been idle for
// loweredIdle.
func (p *loweredPool) work(w *loweredWorker) {
	runtime.LockOSThread()
	// No UnlockOSThread: the thread ends with this goroutine (see above).
	// If lowering fails (a sandbox that forbids it), the calls run at the
	// server's priority, as they would without the bound.
	lowerThread(encodeNice)
	idle := time.NewTimer(loweredIdle)
	defer idle.Stop()
	for {
		select {
		case c := <-w.calls:
			err := c.fn()
			p.mu.Lock()
			p.idle = append(p.idle, w)
			p.mu.Unlock()
			c.done <- err
			idle.Reset(loweredIdle)
		case <-idle.C:
			p.mu.Lock()
			i := slices.Index(p.idle, w)
			if i >= 0 {
				p.idle = slices.Delete(p.idle, i, i+1)
			}
			p.mu.Unlock()
			if i >= 0 {
				return
			}
			// A caller took w from idle as the timer fired: its call
			// is coming.
			idle.Reset(loweredIdle)
		}
	}
}
