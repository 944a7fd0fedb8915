package persist

import (
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/klauspost/compress/zstd"
)

// A column of measurements whose values all differ in their low bits (a
// usage in percent, a latency, anything computed as a ratio) does not
// compress: zstd saved 0.0% of four of the peer benchmark's five float
// columns and 6.6% of the fifth, yet every query that reads their pages
// decompresses them, a quarter of the server's CPU for a query of one
// series over a persisted file (profile of 4 December), and persisting
// compresses them first. So each column already written without a
// dictionary (plainColumns: nearly every value distinct) is tried before
// the file is written: a few windows of its values, in the file's order,
// are compressed as the writer would, and a column that zstd shrinks by
// less than rawSaving is written uncompressed. The codec is per column
// chunk in Parquet, so every reader reads such a file as any other.
const (
	rawWindows    = 4
	rawWindowRows = 4 << 10
	rawSaving     = 0.10
)

// rawEncoder compresses the samples as the Parquet writer's zstd codec
// does at its default level (arrow-go parquet/compress).
var rawEncoder = sync.OnceValue(func() *zstd.Encoder {
	enc, _ := zstd.NewWriter(nil, zstd.WithZeroFrames(true), zstd.WithEncoderLevel(zstd.SpeedDefault),
		zstd.WithEncoderConcurrency(1), zstd.WithAllLitEntropyCompression(true))
	return enc
})

// rawColumns returns the names, among plain, of out's columns (cols[i]
// are column i's arrays, one per chunk, nil where a chunk lacks it;
// perm the file's row order) that zstd would shrink by less than
// rawSaving: written uncompressed.
func rawColumns(out *arrow.Schema, cols [][]arrow.Array, perm permutation, plain []string) []string {
	if len(plain) == 0 || perm.len() == 0 {
		return nil
	}
	isPlain := make(map[string]bool, len(plain))
	for _, n := range plain {
		isPlain[n] = true
	}
	// The windows, spread over the file (a small file is one window):
	// rows of its order as chunk<<32 | row.
	var rows, buf []uint64
	n := perm.len()
	if n <= rawWindows*rawWindowRows {
		rows = append(rows, perm.expand(0, n, buf)...)
	} else {
		for w := range rawWindows {
			start := w * (n - rawWindowRows) / (rawWindows - 1)
			rows = append(rows, perm.expand(start, start+rawWindowRows, buf[:0])...)
		}
	}
	var names []string
	var sample []byte
	for i, f := range out.Fields() {
		if !isPlain[f.Name] {
			continue
		}
		width := f.Type.(arrow.FixedWidthDataType).BitWidth() / 8
		sample = sampleValues(sample[:0], cols[i], rows, width)
		if len(sample) == 0 {
			continue
		}
		if z := rawEncoder().EncodeAll(sample, nil); float64(len(z)) > (1-rawSaving)*float64(len(sample)) {
			names = append(names, f.Name)
		}
	}
	return names
}

// sampleValues appends to dst the width bytes of each non-null value of
// rows (chunk<<32 | row) of arrs, one array per chunk.
func sampleValues(dst []byte, arrs []arrow.Array, rows []uint64, width int) []byte {
	for _, cr := range rows {
		c, r := int(cr>>32), int(uint32(cr))
		if c >= len(arrs) || arrs[c] == nil || arrs[c].IsNull(r) {
			continue
		}
		a := arrs[c]
		bufs := a.Data().Buffers()
		if len(bufs) < 2 || bufs[1] == nil {
			continue
		}
		off := (a.Data().Offset() + r) * width
		dst = append(dst, bufs[1].Bytes()[off:off+width]...)
	}
	return dst
}
