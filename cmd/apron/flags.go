package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// applyEnv sets every flag not given on the command line from
// APRON_<FLAG> when that variable is set.
func applyEnv(fs *flag.FlagSet) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || err != nil {
			return
		}
		name := "APRON_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s=%q: %w", name, v, e)
			}
		}
	})
	return err
}

// byteSize is a flag of bytes that takes 1024, 512MiB, 2GiB, 1GB, …
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteSize) Set(s string) error {
	n, err := parseBytes(s)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

var byteUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1},
}

func parseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(strings.ToUpper(t), strings.ToUpper(u.suffix)) && len(t) > len(u.suffix) {
			// Match the case-sensitive spelling first; KiB and KB differ.
			if strings.HasSuffix(t, u.suffix) || !strings.ContainsAny(u.suffix, "i") {
				mult = u.mult
				t = strings.TrimSpace(t[:len(t)-len(u.suffix)])
				break
			}
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("invalid size %q: want a number of bytes with an optional unit (KiB, MiB, GiB, KB, MB, GB)", s)
	}
	return int64(f * float64(mult)), nil
}
