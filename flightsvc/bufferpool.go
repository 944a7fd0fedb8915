package flightsvc

import (
	"math/bits"
	"sync"
)

// framePool is the gRPC server's buffer pool (the HTTP/2 frames a message
// is read into, the buffers replies are written from). gRPC's default pool
// zeroes every buffer it hands out, which costs as much as a copy of every
// byte ingested; every user of these buffers (gRPC's framer and codecs)
// writes a buffer's whole length before reading it, so there is nothing
// to zero for. Buffers come in power-of-two classes from 256 B to 1 MiB,
// as gRPC's; larger ones are not pooled.
type framePool struct {
	classes [framePoolClasses]sync.Pool
}

const (
	framePoolMinShift = 8
	framePoolMaxShift = 20
	framePoolClasses  = framePoolMaxShift - framePoolMinShift + 1
)

// class is the index of the smallest class holding n bytes, or -1 when n
// is larger than the largest.
func (*framePool) class(n int) int {
	if n <= 1<<framePoolMinShift {
		return 0
	}
	shift := bits.Len(uint(n - 1))
	if shift > framePoolMaxShift {
		return -1
	}
	return shift - framePoolMinShift
}

func (p *framePool) Get(n int) *[]byte {
	c := p.class(n)
	if c < 0 {
		b := make([]byte, n)
		return &b
	}
	if v, ok := p.classes[c].Get().(*[]byte); ok {
		*v = (*v)[:n]
		return v
	}
	b := make([]byte, n, 1<<(c+framePoolMinShift))
	return &b
}

func (p *framePool) Put(b *[]byte) {
	c := cap(*b)
	if c < 1<<framePoolMinShift || c > 1<<framePoolMaxShift || c&(c-1) != 0 {
		return // not one of ours
	}
	p.classes[p.class(c)].Put(b)
}
