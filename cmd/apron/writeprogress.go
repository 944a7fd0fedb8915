package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// writeProgress shows how far apron write has got: a bar on a terminal
// (bytes read of the total, rows acknowledged, rows/s, ETA), else a
// plain line every progressLineEvery on stderr (no escape codes: logs
// and CI read it).
type writeProgress struct {
	out   io.Writer
	mode  string // bar, lines or none
	total int64  // bytes of all inputs, -1 when unknown (stdin)
	start time.Time
}

// progressLineEvery is how often the lines mode prints.
var progressLineEvery = 5 * time.Second

func newWriteProgress(stderr io.Writer, mode string, total int64, start time.Time) *writeProgress {
	if mode == "auto" {
		mode = "lines"
		if isTerminal(stderr) {
			mode = "bar"
		}
	}
	return &writeProgress{out: stderr, mode: mode, total: total, start: start}
}

// run shows the progress that state reports (bytes read, rows
// acknowledged) until the returned stop is called.
func (p *writeProgress) run(state func() (bytes, rows int64)) (stop func()) {
	if p.mode == "none" {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	var bar *progressbar.ProgressBar
	every := progressLineEvery
	if p.mode == "bar" {
		every = 200 * time.Millisecond
		bar = progressbar.NewOptions64(p.total,
			progressbar.OptionSetWriter(p.out),
			progressbar.OptionShowBytes(true),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionUseANSICodes(true),
		)
	}
	show := func() {
		bytes, rows := state()
		el := time.Since(p.start).Seconds()
		rate := 0.0
		if el > 0 {
			rate = float64(rows) / el
		}
		if bar != nil {
			bar.Describe(fmt.Sprintf("%s rows (%s rows/s)", groupDigits(rows), shortRate(rate)))
			bar.Set64(bytes)
			return
		}
		read := humanBytes(bytes)
		if p.total >= 0 {
			pct := 0.0
			if p.total > 0 {
				pct = 100 * float64(bytes) / float64(p.total)
			}
			read = fmt.Sprintf("%s of %s (%.0f%%)", read, humanBytes(p.total), pct)
		}
		fmt.Fprintf(p.out, "apron write: %s rows written, %s read, %s rows/s, %s\n", groupDigits(rows), read, shortRate(rate), roundDuration(time.Since(p.start)))
	}
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				if bar != nil {
					bar.Finish()
				}
				return
			case <-t.C:
				show()
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// humanBytes is n as 12.3 MiB.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
