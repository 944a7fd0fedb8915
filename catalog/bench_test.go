package catalog

import (
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// BenchmarkPlanWriteNoChange measures the hot path: a write into an
// existing table whose columns already cover the batch.
//
//   - same_schema: every batch of a stream shares one *arrow.Schema.
//   - new_schema_pointer: equal schemas in different pointers, so the
//     per-table cache misses and fields are compared one by one.
func BenchmarkPlanWriteNoChange(b *testing.B) {
	for _, ncols := range []int{8, 128} {
		fields := []arrow.Field{fld("time", tsNs)}
		for i := 1; i < ncols; i++ {
			fields = append(fields, fld(fmt.Sprintf("col%03d", i), f64))
		}
		c := New(Limits{})
		write(b, c, "metrics", "cpu", sch(fields...))
		s1, s2 := sch(fields...), sch(fields...)

		b.Run(fmt.Sprintf("same_schema/cols=%d", ncols), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if ch, err := c.PlanWrite("metrics", "cpu", s1, WriteOptions{}); ch != nil || err != nil {
					b.Fatal(ch, err)
				}
			}
		})
		b.Run(fmt.Sprintf("new_schema_pointer/cols=%d", ncols), func(b *testing.B) {
			b.ReportAllocs()
			schemas := [2]*arrow.Schema{s1, s2}
			i := 0
			for b.Loop() {
				i++
				if ch, err := c.PlanWrite("metrics", "cpu", schemas[i&1], WriteOptions{}); ch != nil || err != nil {
					b.Fatal(ch, err)
				}
			}
		})
	}
}
