package main

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/apron-db/apron/buffer"
)

// defaultGOGC is the GC target apron runs with unless told otherwise
// (buffer.DefaultGOGC says why and what it costs).
const defaultGOGC = buffer.DefaultGOGC

// defaultGCMinHeap is --gc-min-heap's default (internal/gcfloor says
// why). One host over the last 10 minutes of a persisted 5M-row day (Go
// client, query ticket, 2 cores): 20 collections a second at GOGC 100,
// p90 4.1-4.3 ms and p99 7.1-8.1 ms; at a goal of ~64 MiB, 2 a second,
// p90 3.3-3.4 ms and p99 6.3-6.9 ms.
const defaultGCMinHeap = 64 << 20

// setGCPercent applies --gogc, or leaves a GOGC environment variable in
// force when the flag was not given. It returns the GOGC in force.
func setGCPercent(flagValue int, given bool) string {
	if env, ok := os.LookupEnv("GOGC"); ok && !given {
		return env
	}
	debug.SetGCPercent(flagValue)
	if flagValue < 0 {
		return "off"
	}
	return strconv.Itoa(flagValue)
}

// gcMemoryLimit is --gc-memory-limit: auto (buffer.DefaultGCMemoryLimit
// of --buffer-mem-limit), off, or a size.
type gcMemoryLimit struct {
	auto  bool
	bytes int64 // with auto false: 0 is off
}

func (g *gcMemoryLimit) String() string {
	switch {
	case g.auto:
		return "auto"
	case g.bytes == 0:
		return "off"
	}
	return strconv.FormatInt(g.bytes, 10)
}

func (g *gcMemoryLimit) Set(s string) error {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "auto":
		*g = gcMemoryLimit{auto: true}
		return nil
	case "off", "none", "0":
		*g = gcMemoryLimit{}
		return nil
	}
	n, err := parseBytes(s)
	if err != nil {
		return fmt.Errorf("want auto, off or a size such as 3GiB: %w", err)
	}
	if n < 64<<20 {
		return fmt.Errorf("%d bytes is under 64 MiB: the GC would run without pause; want auto, off or a larger size", n)
	}
	*g = gcMemoryLimit{bytes: n}
	return nil
}

// setMemoryLimit applies --gc-memory-limit for a buffer of memLimit bytes,
// or leaves a GOMEMLIMIT environment variable in force when the flag was
// not given. It returns the limit in force, for the ready line.
func setMemoryLimit(g gcMemoryLimit, given bool, memLimit int64) string {
	if env, ok := os.LookupEnv("GOMEMLIMIT"); ok && !given {
		return env
	}
	n := g.bytes
	if g.auto {
		n = buffer.DefaultGCMemoryLimit(memLimit)
	}
	if n == 0 {
		debug.SetMemoryLimit(math.MaxInt64)
		return "off"
	}
	debug.SetMemoryLimit(n)
	return strconv.FormatInt(n, 10)
}
