//go:build !unix

package output

import "time"

// cpuTime is not measured here: cpu-ns/row reads 0.
func cpuTime() time.Duration { return 0 }
