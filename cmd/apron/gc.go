package main

import (
	"os"
	"runtime/debug"
	"strconv"

	"github.com/apron-db/apron/buffer"
)

// defaultGOGC is the GC target apron runs with unless told otherwise
// (buffer.DefaultGOGC says why and what it costs).
const defaultGOGC = buffer.DefaultGOGC

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
