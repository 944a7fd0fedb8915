package output

import (
	"reflect"
	"testing"
)

func TestPlanLayout(t *testing.T) {
	for _, c := range []struct {
		name    string
		natural []int
		width   int
		cols    []int
		widths  []int
	}{
		{"no_limit", []int{30, 40, 5}, 0, []int{0, 1, 2}, []int{30, 40, 5}},
		{"fits", []int{10, 10}, 27, []int{0, 1}, []int{10, 10}},
		// 1+33+43+8 = 85 > 60: cap the two wide ones at a common 22, the
		// one to spare going to the first.
		{"shrink", []int{30, 40, 5}, 60, []int{0, 1, 2}, []int{23, 22, 5}},
		// Even capped at 20 the five do not fit in 60: the middle ones go,
		// right of the middle first; what that frees goes to the first.
		{"prune", []int{29, 30, 30, 30, 30}, 60, []int{0, gapColumn, 4}, []int{29, 1, 20}},
		{"one_left", []int{29, 30, 30}, 36, []int{0, gapColumn}, []int{28, 1}},
		{"too_narrow", []int{29}, 10, []int{0}, []int{20}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := planLayout(c.natural, c.width)
			if !reflect.DeepEqual(l.cols, c.cols) || !reflect.DeepEqual(l.widths, c.widths) {
				t.Errorf("planLayout(%v, %d) = %v %v, want %v %v", c.natural, c.width, l.cols, l.widths, c.cols, c.widths)
			}
			if c.width > 0 && c.name != "too_narrow" && boxWidth(l.widths) > c.width {
				t.Errorf("box %d wide, more than %d", boxWidth(l.widths), c.width)
			}
		})
	}
}
