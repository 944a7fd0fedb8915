package input

import (
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// colSpec is one output column of a CSV or JSONL file: its name in the
// batch, its kind and how it got it (for error hints).
type colSpec struct {
	name   string
	kind   Kind
	origin typeOrigin
	// dict: a string column sent dictionary-encoded (dictCol).
	dict bool
}

// colBuilder appends values of one column. It keeps the concrete builder
// so that the per-value path is a switch and a direct call, not an
// interface call per value.
type colBuilder struct {
	kind Kind
	// checkUTF8: validate each string value. Off when the caller checked
	// the whole chunk or line at once (a substring of valid UTF-8 cut at
	// ASCII delimiters is valid).
	checkUTF8 bool
	b         array.Builder
	str       *array.StringBuilder
	i64       *array.Int64Builder
	u64       *array.Uint64Builder
	f64       *array.Float64Builder
	bl        *array.BooleanBuilder
	ts        *array.TimestampBuilder
	fx        *fixedCol  // instead of b, for the fixed-width kinds of CSV chunks
	sx        *stringCol // instead of b, for strings of CSV chunks
	dx        *dictCol   // instead of b, for strings of few values of CSV chunks
}

// newDirectColBuilder is newColBuilder for a CSV chunk of rows rows: the
// fixed-width kinds are written straight into Arrow buffers (fixedCol).
func newDirectColBuilder(mem memory.Allocator, s colSpec, rows, dataBytes int) *colBuilder {
	switch kind := s.kind; kind {
	case KindInt64, KindUint64, KindFloat64, KindTimestamp:
		return &colBuilder{kind: kind, fx: newFixedCol(mem, kind, rows)}
	case KindString:
		if s.dict {
			return &colBuilder{kind: kind, dx: newDictCol(mem, rows, dataBytes)}
		}
		return &colBuilder{kind: kind, sx: newStringCol(mem, rows, dataBytes+dataBytes/8)}
	}
	return newColBuilder(mem, s.kind, rows, dataBytes)
}

// newColBuilder reserves rows values (and dataBytes of string data) up
// front: the CSV splitter knows how many rows a chunk has, and growing a
// builder copies its buffers.
func newColBuilder(mem memory.Allocator, kind Kind, rows, dataBytes int) *colBuilder {
	c := &colBuilder{kind: kind}
	switch kind {
	case KindInt64:
		c.i64 = array.NewInt64Builder(mem)
		c.b = c.i64
	case KindUint64:
		c.u64 = array.NewUint64Builder(mem)
		c.b = c.u64
	case KindFloat64:
		c.f64 = array.NewFloat64Builder(mem)
		c.b = c.f64
	case KindBool:
		c.bl = array.NewBooleanBuilder(mem)
		c.b = c.bl
	case KindTimestamp:
		c.ts = array.NewTimestampBuilder(mem, timestampType)
		c.b = c.ts
	default:
		c.str = array.NewStringBuilder(mem)
		c.b = c.str
		if dataBytes > 0 {
			c.str.ReserveData(dataBytes)
		}
	}
	if rows > 0 {
		c.b.Reserve(rows)
	}
	return c
}

func (c *colBuilder) appendNull() {
	if c.fx != nil {
		c.fx.putNull()
		return
	}
	if c.sx != nil {
		c.sx.putNull()
		return
	}
	if c.dx != nil {
		c.dx.putNull()
		return
	}
	c.b.AppendNull()
}

// appendText parses v as the column's kind and appends it. v is not kept.
func (c *colBuilder) appendText(v []byte, tp *timeParser) error {
	switch c.kind {
	case KindString:
		if c.checkUTF8 && !utf8.Valid(v) {
			return newTypeError(v, KindString, "not valid UTF-8")
		}
		if c.sx != nil {
			return c.sx.put(v)
		}
		if c.dx != nil {
			return c.dx.put(v)
		}
		c.str.BinaryBuilder.Append(v)
	case KindInt64:
		n, ok := parseInt64(v)
		if !ok {
			return newTypeError(v, KindInt64, "")
		}
		if c.fx != nil {
			c.fx.putInt(n)
		} else {
			c.i64.Append(n)
		}
	case KindFloat64:
		f, ok := parseFloat64(v)
		if !ok {
			return newTypeError(v, KindFloat64, "")
		}
		if c.fx != nil {
			c.fx.putFloat(f)
		} else {
			c.f64.Append(f)
		}
	case KindUint64:
		n, ok := parseUint64(v)
		if !ok {
			return newTypeError(v, KindUint64, "")
		}
		if c.fx != nil {
			c.fx.putUint(n)
		} else {
			c.u64.Append(n)
		}
	case KindBool:
		t, ok := parseBool(v)
		if !ok {
			return newTypeError(v, KindBool, "")
		}
		c.bl.Append(t)
	case KindTimestamp:
		ns, err := tp.parse(v)
		if err != nil {
			return newTypeError(v, KindTimestamp, err.Error())
		}
		if c.fx != nil {
			c.fx.putInt(ns)
		} else {
			c.ts.Append(arrow.Timestamp(ns))
		}
	}
	return nil
}

func (c *colBuilder) newArray() arrow.Array {
	if c.fx != nil {
		return c.fx.newArray()
	}
	if c.sx != nil {
		return c.sx.newArray()
	}
	if c.dx != nil {
		return c.dx.newArray()
	}
	return c.b.NewArray()
}

func (c *colBuilder) release() {
	if c.fx != nil {
		c.fx.release()
		return
	}
	if c.sx != nil {
		c.sx.release()
		return
	}
	if c.dx != nil {
		c.dx.release()
		return
	}
	c.b.Release()
}

// buildRecord turns builders into a record batch; it releases the builders.
func buildRecord(schema *arrow.Schema, cols []*colBuilder, rows int) arrow.RecordBatch {
	arrs := make([]arrow.Array, len(cols))
	for i, c := range cols {
		arrs[i] = c.newArray()
		c.release()
	}
	rec := array.NewRecordBatch(schema, arrs, int64(rows))
	for _, a := range arrs {
		a.Release()
	}
	return rec
}

func releaseBuilders(cols []*colBuilder) {
	for _, c := range cols {
		if c != nil {
			c.release()
		}
	}
}

func schemaOf(specs []colSpec) *arrow.Schema {
	fields := make([]arrow.Field, len(specs))
	for i, s := range specs {
		fields[i] = arrow.Field{Name: s.name, Type: s.kind.arrowType(), Nullable: true}
		if s.dict {
			fields[i].Type = dictType
		}
	}
	return arrow.NewSchema(fields, nil)
}
