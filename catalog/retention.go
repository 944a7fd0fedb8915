package catalog

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Retention: a database's rows older than now minus its retention are
// invisible to reads at once and deleted from the object store once a
// file's rows are all that old (package buffer does both). A database's
// own retention overrides the server's default (--retention);
// RetentionNone keeps its rows forever whatever the default.

// RetentionNone is a database retention that keeps rows forever.
const RetentionNone time.Duration = -1

// MinRetention is the shortest retention: shorter would expire rows
// while clients still write them as "now".
const MinRetention = time.Minute

// SetRetention sets db's retention (0: the server's default), saving the
// catalog to path first. changed is false if it already was r.
func (c *Catalog) SetRetention(path, db string, r time.Duration) (changed bool, err error) {
	if r != 0 && r != RetentionNone && r < MinRetention {
		return false, newError(ErrInvalidSchema, "catalog: retention %s of database %s is shorter than %s", r, quoteName(db), MinRetention)
	}
	return c.commitDDL(path, func(s *Snapshot) (*Snapshot, error) {
		d := s.databases[db]
		if d == nil {
			return nil, newError(ErrDatabaseNotFound, "catalog: database %s does not exist", quoteName(db))
		}
		if d.Retention == r {
			return nil, nil
		}
		nd := newDatabase(d.Name, d.ID, d.Tables)
		nd.Retention = r
		return s.withDatabase(nd, s.nextDatabaseID, s.nextTableID), nil
	})
}

// ParseRetention reads a retention as users write it: a Go duration
// ("36h", "90m") or a number of days or weeks ("30d", "2w"); "none" (or
// "infinite") keeps rows forever, "default" (or "") is the server's
// default.
func ParseRetention(s string) (time.Duration, error) {
	s = strings.TrimSpace(strings.ToLower(s))
	switch s {
	case "", "default":
		return 0, nil
	case "none", "infinite", "forever":
		return RetentionNone, nil
	}
	var r time.Duration
	if n, unit := s[:len(s)-1], s[len(s)-1]; unit == 'd' || unit == 'w' {
		days, err := strconv.ParseFloat(n, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: retention %q: want a duration such as 30d, 2w, 36h or none", ErrInvalidSchema, s)
		}
		if unit == 'w' {
			days *= 7
		}
		r = time.Duration(days * float64(24*time.Hour))
	} else {
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("%w: retention %q: want a duration such as 30d, 2w, 36h or none", ErrInvalidSchema, s)
		}
		r = d
	}
	if r < MinRetention {
		return 0, fmt.Errorf("%w: retention %q is shorter than %s", ErrInvalidSchema, s, MinRetention)
	}
	return r, nil
}

// FormatRetention writes r as ParseRetention reads it: whole days as
// "30d", otherwise a Go duration; RetentionNone as "none", 0 as
// "default".
func FormatRetention(r time.Duration) string {
	switch {
	case r == 0:
		return "default"
	case r < 0:
		return "none"
	case r%(24*time.Hour) == 0:
		return strconv.FormatInt(int64(r/(24*time.Hour)), 10) + "d"
	}
	return r.String()
}
