package persist

import (
	"github.com/apache/arrow-go/v18/arrow"
)

// The Parquet writer dictionary-encodes a column until its dictionary
// page reaches 1 MiB, then writes the dictionary it built and re-encodes
// the row group's values as PLAIN. For a column of measurements whose
// every value differs (a usage in percent, a latency), that is all waste:
// persisting the 5M-row table of the peer benchmark (five such float
// columns) spent 56% of its CPU hashing floats into dictionaries and
// falling back (persist profile, 14.4 s for the segment). So before a
// file is written, each numeric column is sampled: one whose sample is
// almost all distinct values is written without a dictionary.
//
// The sample is sampleRows rows spread over the partition. A value that
// repeats a few times in the file still shows as distinct in a sample of
// an eighth of a row group, so only columns whose values repeat less than
// about twice on average cross distinctShare, and for those a dictionary
// saves little even when it fits (8-byte values against a dictionary
// entry plus a 17-bit index). Strings keep their dictionaries (tags are
// the columns that repeat), and the time column never has one.
const (
	sampleRows    = 16 << 10
	distinctShare = 0.95
)

// plainColumns returns the names of out's numeric columns (cols[i] are
// column i's arrays, one per chunk, nil where a chunk lacks it) whose
// values are nearly all distinct: written without a dictionary.
func plainColumns(out *arrow.Schema, cols [][]arrow.Array) []string {
	var names []string
	for i, f := range out.Fields() {
		if i == 0 || !sampledForDictionary(f.Type) {
			continue // the time column has no dictionary (WriterProperties)
		}
		if mostlyDistinct(cols[i], f.Type.(arrow.FixedWidthDataType).BitWidth()/8) {
			names = append(names, f.Name)
		}
	}
	return names
}

// sampledForDictionary says whether a column of type t is sampled: the
// fixed-width types of at least a byte that Parquet dictionary-encodes.
func sampledForDictionary(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
		arrow.FLOAT32, arrow.FLOAT64, arrow.DATE32, arrow.TIMESTAMP, arrow.DURATION:
		return true
	}
	return false
}

// mostlyDistinct samples up to sampleRows non-null values of width bytes
// each, evenly spread over arrs, and says whether more than distinctShare
// of them are distinct.
func mostlyDistinct(arrs []arrow.Array, width int) bool {
	var total int
	for _, a := range arrs {
		if a != nil {
			total += a.Len()
		}
	}
	if total == 0 || width <= 0 || width > 8 {
		return false
	}
	step := max(1, total/sampleRows)
	seen := make(map[uint64]struct{}, min(total, sampleRows))
	sampled := 0
	pos := 0 // row of the partition, across arrs
	for _, a := range arrs {
		if a == nil {
			continue
		}
		n := a.Len()
		bufs := a.Data().Buffers()
		if len(bufs) < 2 || bufs[1] == nil {
			pos += n
			continue
		}
		data := bufs[1].Bytes()
		off := a.Data().Offset()
		// The first sampled row of this array: the next multiple of step.
		first := (step - pos%step) % step
		for r := first; r < n; r += step {
			if a.IsNull(r) {
				continue
			}
			b := data[(off+r)*width : (off+r+1)*width]
			var v uint64
			for k := range width {
				v |= uint64(b[k]) << (8 * k)
			}
			seen[v] = struct{}{}
			sampled++
		}
		pos += n
	}
	return sampled > 0 && float64(len(seen)) > distinctShare*float64(sampled)
}
