package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// formatVersion is the version of the catalog file layout described in
// doc.go. Bump it for any change an older server could misread. Version 2
// added tokens, version 3 drops, version 4 replaces in progress, version 5 last-value caches
// (lastvalue.go); a catalog is written in the lowest version that holds
// what it has (without tokens or drops, version 1, byte for byte as
// before; version 4 only while a replace is in progress, version 5 while
// a last-value cache is defined). A server that reads only an older
// version refuses a newer file rather than run without its tokens, bring
// back dropped rows or show the rows of an unfinished replace.
const (
	formatVersion          = 5
	formatVersionLastValue = 5
	formatVersionReplacing = 4
	formatVersionDropped   = 3
	formatVersionTokens    = 2
	formatVersionPlain     = 1
)

type fileCatalog struct {
	FormatVersion  int             `json:"format_version"`
	Version        uint64          `json:"version"`
	NextDatabaseID uint64          `json:"next_database_id"`
	NextTableID    uint64          `json:"next_table_id"`
	Databases      []fileDatabase  `json:"databases"`
	Tokens         []fileToken     `json:"tokens,omitempty"`
	Dropped        []fileDropped   `json:"dropped,omitempty"`
	Replacing      []fileReplacing `json:"replacing,omitempty"`
	LastValue      []fileLastValue `json:"last_value_caches,omitempty"`
}

// fileReplacing is a replace in progress (replace.go).
type fileReplacing struct {
	Database string `json:"database"`
	Table    string `json:"table"`
	ID       uint64 `json:"id"`
	From     uint64 `json:"from_segment"`
}

// fileDropped is a Dropped record; table is absent for a database.
type fileDropped struct {
	Database string `json:"database"`
	Table    string `json:"table,omitempty"`
	ID       uint64 `json:"id"`
	From     uint64 `json:"from_segment,omitempty"`
	To       uint64 `json:"to_segment"`
}

type fileDatabase struct {
	Name   string      `json:"name"`
	ID     uint64      `json:"id"`
	Tables []fileTable `json:"tables"`
	// RetentionNS: nanoseconds; -1 keeps forever; absent, the server's
	// default (format version 3).
	RetentionNS int64 `json:"retention_ns,omitempty"`
}

type fileTable struct {
	Name    string       `json:"name"`
	ID      uint64       `json:"id"`
	Columns []fileColumn `json:"columns"`
}

type fileColumn struct {
	Name     string `json:"name"`
	ID       int    `json:"id"`
	Type     string `json:"type"`
	Unit     string `json:"unit,omitempty"`
	TimeZone string `json:"time_zone,omitempty"`
}

// encodeSnapshot renders s as the catalog file. The output is
// deterministic (databases and tables sorted, columns in order) so that
// golden files and diffs are meaningful.
func encodeSnapshot(s *Snapshot) ([]byte, error) {
	fc := fileCatalog{
		FormatVersion:  formatVersionPlain,
		Version:        s.version,
		NextDatabaseID: s.nextDatabaseID,
		NextTableID:    s.nextTableID,
		Databases:      make([]fileDatabase, 0, len(s.sorted)),
	}
	for _, d := range s.sorted {
		fd := fileDatabase{Name: d.Name, ID: d.ID, Tables: make([]fileTable, 0, len(d.sorted)), RetentionNS: int64(d.Retention)}
		if d.Retention != 0 {
			fc.FormatVersion = formatVersionDropped
		}
		for _, t := range d.sorted {
			ft := fileTable{Name: t.Name, ID: t.ID, Columns: make([]fileColumn, 0, len(t.Columns))}
			for _, c := range t.Columns {
				fcol, err := encodeType(c.Type)
				if err != nil {
					return nil, fmt.Errorf("catalog: encode db %q table %q column %q: %w", d.Name, t.Name, c.Name, err)
				}
				fcol.Name, fcol.ID = c.Name, c.ID
				ft.Columns = append(ft.Columns, fcol)
			}
			fd.Tables = append(fd.Tables, ft)
		}
		fc.Databases = append(fc.Databases, fd)
	}
	if len(s.tokens) > 0 {
		fc.FormatVersion = max(fc.FormatVersion, formatVersionTokens)
		for _, t := range s.Tokens() {
			fc.Tokens = append(fc.Tokens, encodeToken(t))
		}
	}
	if len(s.dropped) > 0 {
		fc.FormatVersion = max(fc.FormatVersion, formatVersionDropped)
		for _, d := range s.dropped {
			fc.Dropped = append(fc.Dropped, fileDropped(d))
		}
	}
	if len(s.replacing) > 0 {
		fc.FormatVersion = max(fc.FormatVersion, formatVersionReplacing)
		for _, r := range s.Replaces() {
			fc.Replacing = append(fc.Replacing, fileReplacing(r))
		}
	}
	if len(s.lvcs) > 0 {
		fc.FormatVersion = max(fc.FormatVersion, formatVersionLastValue)
		for _, l := range s.LastValueCaches() {
			fc.LastValue = append(fc.LastValue, fileLastValue(*l))
		}
	}
	out, err := json.MarshalIndent(fc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("catalog: encode: %w", err)
	}
	return append(out, '\n'), nil
}

// decodeSnapshot parses a catalog file and checks every invariant the rest
// of the package relies on (valid names, time first, unique IDs), since a
// hand-edited or damaged file must not crash the server later. Errors wrap
// ErrCorrupt only.
func decodeSnapshot(data []byte) (*Snapshot, error) {
	// Read the version first: a file from a newer server may have fields
	// this one does not know, and deserves a clearer message than
	// "unknown field". Unmarshal also rejects trailing data.
	var head struct {
		FormatVersion *int `json:"format_version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if head.FormatVersion == nil {
		return nil, fmt.Errorf("%w: no format_version", ErrCorrupt)
	}
	if v := *head.FormatVersion; v < formatVersionPlain || v > formatVersion {
		return nil, fmt.Errorf("%w: format_version %d, this server reads %d to %d (a newer server wrote it?)", ErrCorrupt, v, formatVersionPlain, formatVersion)
	}

	var fc fileCatalog
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fc); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	s, err := buildSnapshot(&fc)
	if err != nil {
		// %v, not %w: a name or type error inside the file is corruption,
		// and callers should see only ErrCorrupt.
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return s, nil
}

func buildSnapshot(fc *fileCatalog) (*Snapshot, error) {
	dbs := make(map[string]*Database, len(fc.Databases))
	dbIDs := map[uint64]bool{}
	tableIDs := map[uint64]bool{}
	var maxDB, maxTable uint64
	for _, fd := range fc.Databases {
		if err := ValidateDatabaseName(fd.Name); err != nil {
			return nil, err
		}
		if dbs[fd.Name] != nil {
			return nil, fmt.Errorf("database %q appears twice", fd.Name)
		}
		if fd.ID == 0 || dbIDs[fd.ID] {
			return nil, fmt.Errorf("database %q: id %d is zero or reused", fd.Name, fd.ID)
		}
		dbIDs[fd.ID] = true
		maxDB = max(maxDB, fd.ID)
		tables := make(map[string]*Table, len(fd.Tables))
		for _, ft := range fd.Tables {
			if err := ValidateTableName(fd.Name, ft.Name); err != nil {
				return nil, err
			}
			if tables[ft.Name] != nil {
				return nil, fmt.Errorf("db %q: table %q appears twice", fd.Name, ft.Name)
			}
			if ft.ID == 0 || tableIDs[ft.ID] {
				return nil, fmt.Errorf("db %q table %q: id %d is zero or reused", fd.Name, ft.Name, ft.ID)
			}
			tableIDs[ft.ID] = true
			maxTable = max(maxTable, ft.ID)
			cols, err := buildColumns(fd.Name, ft)
			if err != nil {
				return nil, err
			}
			tables[ft.Name] = newTable(fd.Name, ft.Name, ft.ID, cols)
		}
		nd := newDatabase(fd.Name, fd.ID, tables)
		if fd.RetentionNS != 0 {
			if fc.FormatVersion < formatVersionDropped {
				return nil, fmt.Errorf("database %q: retention in a format_version %d file", fd.Name, fc.FormatVersion)
			}
			if fd.RetentionNS < -1 {
				return nil, fmt.Errorf("database %q: retention_ns %d", fd.Name, fd.RetentionNS)
			}
			nd.Retention = time.Duration(fd.RetentionNS)
		}
		dbs[fd.Name] = nd
	}
	if fc.NextDatabaseID <= maxDB || fc.NextTableID <= maxTable {
		return nil, fmt.Errorf("next ids (database %d, table %d) not above the ids in use (%d, %d)",
			fc.NextDatabaseID, fc.NextTableID, maxDB, maxTable)
	}
	s := newSnapshot(fc.Version, dbs, fc.NextDatabaseID, fc.NextTableID)
	if len(fc.Tokens) > 0 && fc.FormatVersion < formatVersionTokens {
		return nil, fmt.Errorf("tokens in a format_version %d file", fc.FormatVersion)
	}
	if len(fc.Dropped) > 0 && fc.FormatVersion < formatVersionDropped {
		return nil, fmt.Errorf("drops in a format_version %d file", fc.FormatVersion)
	}
	for _, fd := range fc.Dropped {
		if err := ValidateDatabaseName(fd.Database); err != nil {
			return nil, err
		}
		if fd.Table != "" {
			if err := ValidateTableName(fd.Database, fd.Table); err != nil {
				return nil, err
			}
		}
		if fd.From >= fd.To {
			return nil, fmt.Errorf("dropped %q.%q: segments %d to %d is no range", fd.Database, fd.Table, fd.From, fd.To)
		}
		s.dropped = append(s.dropped, Dropped(fd))
	}
	if len(fc.Replacing) > 0 && fc.FormatVersion < formatVersionReplacing {
		return nil, fmt.Errorf("replaces in progress in a format_version %d file", fc.FormatVersion)
	}
	for _, fr := range fc.Replacing {
		if err := ValidateDatabaseName(fr.Database); err != nil {
			return nil, err
		}
		if err := ValidateTableName(fr.Database, fr.Table); err != nil {
			return nil, err
		}
		if fr.ID == 0 || tableIDs[fr.ID] || fr.ID >= fc.NextTableID {
			return nil, fmt.Errorf("replace of %q.%q: id %d is zero, in use or not below next_table_id", fr.Database, fr.Table, fr.ID)
		}
		tableIDs[fr.ID] = true
		k := dropKey(fr.Database, fr.Table)
		if s.replacing[k] != nil {
			return nil, fmt.Errorf("replace of %q.%q appears twice", fr.Database, fr.Table)
		}
		if s.replacing == nil {
			s.replacing = map[string]*replacing{}
		}
		s.replacing[k] = &replacing{Replacing: Replacing(fr)}
	}
	if len(fc.LastValue) > 0 && fc.FormatVersion < formatVersionLastValue {
		return nil, fmt.Errorf("last-value caches in a format_version %d file", fc.FormatVersion)
	}
	for _, fl := range fc.LastValue {
		t, ok := s.Table(fl.Database, fl.Table)
		if !ok {
			return nil, fmt.Errorf("last-value cache %q of %q.%q: no such table", fl.Name, fl.Database, fl.Table)
		}
		if fl.Keys == nil || fl.Count == 0 {
			return nil, fmt.Errorf("last-value cache %q of %q.%q: keys or count missing", fl.Name, fl.Database, fl.Table)
		}
		l, err := completeLastValue(t, LastValueCache(fl))
		if err != nil {
			return nil, err
		}
		k := dropKey(l.Database, l.Table)
		if s.lvcs[k] != nil {
			return nil, fmt.Errorf("last-value cache of %q.%q appears twice", l.Database, l.Table)
		}
		if s.lvcs == nil {
			s.lvcs = map[string]*LastValueCache{}
		}
		s.lvcs[k] = &l
	}
	s.tokens = make(map[string]*Token, len(fc.Tokens))
	for _, ft := range fc.Tokens {
		t, err := decodeToken(ft)
		if err != nil {
			return nil, err
		}
		if err := validateToken(t); err != nil {
			return nil, err
		}
		if s.tokens[t.ID] != nil {
			return nil, fmt.Errorf("token %q appears twice", t.ID)
		}
		s.tokens[t.ID] = t
	}
	return s, nil
}

func buildColumns(db string, ft fileTable) ([]Column, error) {
	if len(ft.Columns) == 0 || ft.Columns[0].Name != TimeColumn || ft.Columns[0].ID != 0 {
		return nil, fmt.Errorf("db %q table %q: column 0 must be %q with id 0", db, ft.Name, TimeColumn)
	}
	cols := make([]Column, 0, len(ft.Columns))
	names := map[string]bool{}
	ids := map[int]bool{}
	for _, fcol := range ft.Columns {
		if err := ValidateColumnName(db, ft.Name, fcol.Name); err != nil {
			return nil, err
		}
		if names[fcol.Name] || fcol.ID < 0 || ids[fcol.ID] {
			return nil, fmt.Errorf("db %q table %q column %q: duplicate name or bad id %d", db, ft.Name, fcol.Name, fcol.ID)
		}
		names[fcol.Name], ids[fcol.ID] = true, true
		dt, err := decodeType(fcol)
		if err != nil {
			return nil, fmt.Errorf("db %q table %q column %q: %w", db, ft.Name, fcol.Name, err)
		}
		if fcol.Name == TimeColumn && !isTimeType(dt) {
			return nil, fmt.Errorf("db %q table %q: column %q has type %s, want %s", db, ft.Name, TimeColumn, dt, timeType)
		}
		cols = append(cols, Column{Name: fcol.Name, Type: dt, ID: fcol.ID})
	}
	return cols, nil
}
