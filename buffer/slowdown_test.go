package buffer

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/apron-db/apron/catalog"
)

// TestPacerTimeLeft: the time a persist has left is its bytes over the
// rate of the last persists less the time it has run; a quarter of its
// estimate once past it; none with no persist in progress.
func TestPacerTimeLeft(t *testing.T) {
	var p writePacer
	now := time.Unix(1000, 0)
	if got := p.timeLeft(now); got != 0 {
		t.Fatalf("no persist: %v left, want 0", got)
	}
	// Before any persist is measured: initialPersistRate.
	p.persisting(now, 16*initialPersistRate)
	if got := p.timeLeft(now.Add(4 * time.Second)); got != 12*time.Second {
		t.Fatalf("16 s estimated, 4 s run: %v left, want 12s", got)
	}
	if got := p.timeLeft(now.Add(15 * time.Second)); got != 4*time.Second {
		t.Fatalf("1 s before its estimate: %v left, want a quarter of it (4s)", got)
	}
	if got := p.timeLeft(now.Add(60 * time.Second)); got != 4*time.Second {
		t.Fatalf("past its estimate: %v left, want a quarter of it (4s)", got)
	}
	// It took 8 s: 2x the initial rate, averaged with nothing.
	p.persisted(true, 8*time.Second)
	if got := p.timeLeft(now); got != 0 {
		t.Fatalf("persist over: %v left, want 0", got)
	}
	if r := math.Float64frombits(p.rate.Load()); r != 2*initialPersistRate {
		t.Fatalf("rate %v, want %v", r, 2*initialPersistRate)
	}
	// A failed persist teaches nothing; the next averages with the last.
	p.persisting(now, 1<<30)
	p.persisted(false, time.Hour)
	p.persisting(now, 4*initialPersistRate)
	p.persisted(true, time.Second)
	if r := math.Float64frombits(p.rate.Load()); r != 3*initialPersistRate {
		t.Fatalf("rate %v, want %v (the average of 2x and 4x)", r, 3*initialPersistRate)
	}
	// A tiny segment: minTimeToRoom.
	p.persisting(now, 1)
	if got := p.timeLeft(now); got != minTimeToRoom {
		t.Fatalf("a tiny segment: %v left, want %v", got, minTimeToRoom)
	}
}

// TestPacerTurns: writes take their turns on one clock, whoever sends
// them, and none waits more than maxSlowdown.
func TestPacerTurns(t *testing.T) {
	var p writePacer
	now := time.Unix(1000, 0)
	for i, want := range []time.Duration{0, 300 * time.Millisecond, 600 * time.Millisecond, 900 * time.Millisecond, maxSlowdown, maxSlowdown} {
		if got := p.take(now, 300*time.Millisecond); got != want {
			t.Fatalf("write %d at once: waits %v, want %v", i, got, want)
		}
	}
	// The clock ran at most maxSlowdown and a turn ahead: later, it is
	// behind now and a write goes at once.
	later := now.Add(maxSlowdown + 300*time.Millisecond)
	if got := p.take(later, time.Millisecond); got != 0 {
		t.Fatalf("a write after the turns: waits %v, want 0", got)
	}
}

// TestWritesSlowDownBeforeFull: with a segment being persisted (held in
// its upload) and the buffer at seven eighths of its limit, writes are
// paced, not refused, and each goes in; below it, or with the slowdown
// off, they are not; a write whose call ends while paced is refused and
// not written; once the persist is let go, every row written is there,
// once.
func TestWritesSlowDownBeforeFull(t *testing.T) {
	b, gate := openSmallGated(t)
	if !b.cfg.WriteSlowdown {
		t.Fatal("the default config has no slowdown")
	}
	rows := genRows(t0.UnixNano(), 40, 1)
	holdPersister(t, b, gate, rows)
	want := append([]row(nil), rows...)
	probe := genRows(t0.UnixNano()+2*day, 1000, 1)
	rec := makeRecord(b.mem, cpuSchema, probe)
	defer rec.Release()
	// Below seven eighths, nothing waits.
	want = append(want, fillToPressing(t, b)...)
	if d := b.writeDelay(rec); d != 0 {
		t.Fatalf("at %d of %d bytes: a delay of %v, want none below 7/8", b.bufferedNow(), b.cfg.MemLimit, d)
	}
	want = append(want, fillTo(t, b, b.cfg.MemLimit/8*7, 500)...)
	// The first write in the zone takes its turn at once (and moves the
	// clock); the next one waits.
	if d := b.writeDelay(rec); d < 0 || d > maxSlowdown {
		t.Fatalf("first delay %v, want within [0, %v]", d, maxSlowdown)
	}
	if d := b.writeDelay(rec); d <= 0 || d > maxSlowdown {
		t.Fatalf("second delay %v, want within (0, %v]", d, maxSlowdown)
	}
	b.cfg.WriteSlowdown = false
	if d := b.writeDelay(rec); d != 0 {
		t.Fatalf("with the slowdown off: a delay of %v", d)
	}
	b.cfg.WriteSlowdown = true
	// The clock put far ahead before each write, so that it waits
	// (maxSlowdown): with turns of a few ms, a write slower than its turn
	// (the race detector's) would find the clock behind and go at once.
	before := testutil.ToFloat64(b.metrics.slowdowns)
	for i := range 2 {
		b.pacer.mu.Lock()
		b.pacer.next = time.Now().Add(time.Hour)
		b.pacer.mu.Unlock()
		r := genRows(t0.UnixNano()+day+int64(i)*1000+700, 100, 1)
		write(t, b, "mem", cpuSchema, r)
		want = append(want, r...)
	}
	if n := testutil.ToFloat64(b.metrics.slowdowns) - before; n != 2 {
		t.Fatalf("%v of 2 writes in the zone paced, want 2", n)
	}
	if s := testutil.ToFloat64(b.metrics.slowdownSeconds); s < 1 {
		t.Fatalf("slowdown seconds %v, want at least 1 (two waits of up to %v)", s, maxSlowdown)
	}
	// A write whose call ends while it is paced is refused and not
	// written: its client may send it again.
	b.pacer.mu.Lock()
	b.pacer.next = time.Now().Add(time.Hour)
	b.pacer.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	gone := makeRecord(b.mem, cpuSchema, genRows(t0.UnixNano()+day+900_000, 10, 1))
	defer gone.Release()
	if _, err := b.Write(ctx, "db", "mem", gone, catalog.WriteOptions{}); !errors.Is(err, ErrBufferFull) || !errors.Is(err, context.Canceled) {
		t.Fatalf("a paced write whose call ended: %v, want ErrBufferFull and context.Canceled", err)
	}
	gate.hold.Store(false)
	gate.openAll()
	waitAllPersisted(t, b)
	assertRows(t, liveRows(t, b, "mem"), want)
}
