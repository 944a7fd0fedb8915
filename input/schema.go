package input

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// Kind is the type of a column that this package builds (CSV, JSONL and
// line protocol; Parquet and Arrow keep their own types).
type Kind uint8

const (
	KindString Kind = iota
	KindInt64
	KindUint64
	KindFloat64
	KindBool
	KindTimestamp
)

var kindNames = [...]string{
	KindString:    "string",
	KindInt64:     "int64",
	KindUint64:    "uint64",
	KindFloat64:   "float64",
	KindBool:      "bool",
	KindTimestamp: "timestamp",
}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// timestampType is the type of every timestamp column we build: UTC
// nanoseconds, the unit of the server's time column, so that it never has
// to convert.
var timestampType = &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}

// arrowType is the Arrow type a column of kind k is built as.
func (k Kind) arrowType() arrow.DataType {
	switch k {
	case KindInt64:
		return arrow.PrimitiveTypes.Int64
	case KindUint64:
		return arrow.PrimitiveTypes.Uint64
	case KindFloat64:
		return arrow.PrimitiveTypes.Float64
	case KindBool:
		return arrow.FixedWidthTypes.Boolean
	case KindTimestamp:
		return timestampType
	}
	return arrow.BinaryTypes.String
}

// kindAliases maps every spelling --schema accepts to its kind. The aliases
// are the names users bring from SQL, Python and InfluxDB.
var kindAliases = map[string]Kind{
	"string": KindString, "str": KindString, "utf8": KindString, "text": KindString, "varchar": KindString, "tag": KindString,
	"int64": KindInt64, "int": KindInt64, "integer": KindInt64, "long": KindInt64, "bigint": KindInt64,
	"uint64": KindUint64, "uint": KindUint64, "unsigned": KindUint64, "ubigint": KindUint64,
	"float64": KindFloat64, "float": KindFloat64, "double": KindFloat64, "number": KindFloat64, "real": KindFloat64,
	"bool": KindBool, "boolean": KindBool,
	"timestamp": KindTimestamp, "time": KindTimestamp, "datetime": KindTimestamp,
}

// ParseKind returns the kind named s (any alias, case-insensitive).
func ParseKind(s string) (Kind, error) {
	k, ok := kindAliases[strings.ToLower(strings.TrimSpace(s))]
	if !ok {
		return 0, schemaf("unknown type %q (use string, int64, uint64, float64, bool or timestamp)", s)
	}
	return k, nil
}

// ParseSchema parses the --schema value "name:type,name:type". A name may
// contain ':' (the type is after the last one); it may not contain ','.
// Order does not matter: the entries only override the types of columns
// found in the file.
func ParseSchema(s string) (map[string]Kind, error) {
	out := map[string]Kind{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		i := strings.LastIndexByte(part, ':')
		if i <= 0 {
			return nil, schemaf("--schema entry %q is not name:type", part)
		}
		name := strings.TrimSpace(part[:i])
		k, err := ParseKind(part[i+1:])
		if err != nil {
			return nil, fmt.Errorf("--schema entry %q: %w", part, err)
		}
		if _, dup := out[name]; dup {
			return nil, schemaf("--schema names column %q twice", name)
		}
		out[name] = k
	}
	return out, nil
}

// typeOrigin says how a column got its type, for the hint in type errors.
type typeOrigin uint8

const (
	originInferred typeOrigin = iota // from the sample
	originSchema                     // from --schema
	originTime                       // the time column
	originLate                       // JSONL: a key first seen after the sample
)
