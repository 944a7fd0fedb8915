package buffer

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestPartsWriter: the parts are the bytes written, in order, whatever the
// mix of small (copied) and large (referenced) writes; small writes that
// follow each other share a part; a written buffer changed afterwards
// changes no copied part.
func TestPartsWriter(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 8))
	for round := range 50 {
		var e encodedBatch
		w := &partsWriter{e: &e}
		var want bytes.Buffer
		var scratch []byte
		for range rnd.IntN(200) {
			n := rnd.IntN(100)
			switch rnd.IntN(4) {
			case 0:
				n = rnd.IntN(3 * partsCopyMax)
			case 1:
				n = rnd.IntN(arenaSize)
			}
			p := make([]byte, n)
			for i := range p {
				p[i] = byte(rnd.Uint32())
			}
			want.Write(p)
			w.Write(p)
			if len(p) <= partsCopyMax {
				scratch = p
				for i := range scratch {
					scratch[i] = 0xEE // the writer reuses its memory
				}
			}
		}
		got := bytes.Join(e.parts, nil)
		if !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("round %d: parts differ from the bytes written (%d vs %d bytes)", round, len(got), want.Len())
		}
		for i := 1; i < len(e.parts); i++ {
			if len(e.parts[i-1]) <= partsCopyMax && len(e.parts[i]) <= partsCopyMax &&
				&e.parts[i-1][:cap(e.parts[i-1])][len(e.parts[i-1])-1] == &e.parts[i][:1][0] {
				t.Fatalf("round %d: parts %d and %d are contiguous in one arena but not joined", round, i-1, i)
			}
		}
		e.release()
	}
}

// TestEncodeBatch: the parts of a batch's WAL payload are the Arrow IPC
// stream that ipc.Writer writes, for small and large batches.
func TestEncodeBatch(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	for _, n := range []int{1, 100, 20000} {
		rec := makeRecord(mem, cpuSchema, genRows(t0.UnixNano(), n, 1))
		nb, err := normalize(rec, t0, mem, fromClient, 0)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		iw := ipc.NewWriter(&want, ipc.WithSchema(nb.rec.Schema()))
		if err := iw.Write(nb.rec); err != nil {
			t.Fatal(err)
		}
		iw.Close()
		e, err := encodeBatch(nb.rec)
		if err != nil {
			t.Fatal(err)
		}
		if got := bytes.Join(e.parts, nil); !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("%d rows: %d bytes in parts, ipc.Writer wrote %d", n, len(got), want.Len())
		}
		e.release()
		nb.release()
	}
}
