package flightsvc

import (
	"encoding/binary"
	"hash/maphash"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// A query's result schema is encoded up to three times per query: in the
// answer to CreatePreparedStatement, in its FlightInfo, and as the first
// message of its DoGet stream. A result's columns carry the Flight SQL
// column metadata (catalog, schema, table, type name, …), so the schema
// of one host's rows of a 9-column table encodes to 5 KB, and arrow-go's
// encoder allocated ~29 KB and ~65 µs of CPU for it, each time: 88 KB of
// the 272 KB allocated, and 9% of the server's CPU, per query of that
// host's last 10 minutes through ADBC's DB-API. Dashboards send the same
// few shapes of query again and again, so the encodings are kept here,
// by the schema's content.

// maxSchemaEncodings bounds the encodings kept (~5 KB each for a result
// of 9 labeled columns), maxSchemaEncodingBytes their bytes: past either,
// kept ones are dropped for the one added. An encoding of more than
// maxSchemaEncodingBytes/64 (a result of thousands of columns) is not
// kept, so that a client's wide results cannot fill the cache alone.
const (
	maxSchemaEncodings     = 512
	maxSchemaEncodingBytes = 16 << 20
)

// schemaEncodings keeps the IPC encodings of recently sent schemas. An
// encoding is found by a hash of the schema and handed out only for a
// schema equal to the one it was made of, metadata included (sameSchema):
// a hash that collides, even one crafted by a client through its column
// aliases, costs an encoding, never another schema's.
type schemaEncodings struct {
	mem  memory.Allocator
	seed maphash.Seed

	mu    sync.Mutex
	m     map[uint64]*schemaEncoding
	bytes int // of the encodings in m
}

// schemaEncoding is one schema's encodings; read-only once made.
type schemaEncoding struct {
	schema *arrow.Schema
	// stream is flight.SerializeSchema's encoding: the schema as an IPC
	// stream of no batches, what a FlightInfo and Flight SQL's answers
	// carry.
	stream []byte
	// message is the flatbuffer of the IPC Schema message: the header of
	// a DoGet stream's first FlightData.
	message []byte
	// dictionaries says whether a column is (or holds) dictionary encoded
	// values: the stream of such a schema carries dictionary batches,
	// which ipc.Writer tracks (recordStreamWriter).
	dictionaries bool
}

func newSchemaEncodings(mem memory.Allocator) *schemaEncodings {
	return &schemaEncodings{mem: mem, seed: maphash.MakeSeed(), m: make(map[uint64]*schemaEncoding)}
}

// serialized is flight.SerializeSchema(schema).
func (c *schemaEncodings) serialized(schema *arrow.Schema) []byte {
	return c.of(schema).stream
}

// of returns the encodings of schema, made now if none equal to it is kept.
func (c *schemaEncodings) of(schema *arrow.Schema) *schemaEncoding {
	h := c.hash(schema)
	c.mu.Lock()
	e := c.m[h]
	c.mu.Unlock()
	if e != nil && sameSchema(e.schema, schema) {
		return e
	}
	e = encodeSchema(schema, c.mem)
	if e.size() > maxSchemaEncodingBytes/64 {
		return e
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[h]; ok {
		c.bytes -= old.size()
		delete(c.m, h)
	}
	for k, old := range c.m {
		if len(c.m) < maxSchemaEncodings && c.bytes+e.size() <= maxSchemaEncodingBytes {
			break
		}
		c.bytes -= old.size()
		delete(c.m, k)
	}
	c.m[h] = e
	c.bytes += e.size()
	return e
}

// size is what an encoding holds, counted twice for the schema it keeps.
func (e *schemaEncoding) size() int { return 2 * (len(e.stream) + len(e.message)) }

// encodeSchema encodes schema once, as its IPC Schema message, and frames
// that as flight.SerializeSchema does (the stream form), rather than
// encoding it a second time through an ipc.Writer: a result too wide to
// keep is encoded at every query.
func encodeSchema(schema *arrow.Schema, mem memory.Allocator) *schemaEncoding {
	p := ipc.GetSchemaPayload(schema, mem)
	defer p.Release()
	meta := p.Meta()
	defer meta.Release()
	message := append([]byte(nil), meta.Bytes()...)
	return &schemaEncoding{
		schema:       schema,
		stream:       ipcStreamOf(message),
		message:      message,
		dictionaries: hasDictionaries(schema.Fields()),
	}
}

// ipcStreamOf frames message as an IPC stream of it alone, as an
// ipc.Writer does: the continuation marker, the length of the message
// padded to 8 bytes, the message and its padding, then the end-of-stream
// marker.
func ipcStreamOf(message []byte) []byte {
	padded := (len(message) + 7) &^ 7
	out := make([]byte, 8+padded+8)
	binary.LittleEndian.PutUint32(out[0:], 0xFFFFFFFF)
	binary.LittleEndian.PutUint32(out[4:], uint32(padded))
	copy(out[8:], message)
	binary.LittleEndian.PutUint32(out[8+padded:], 0xFFFFFFFF) // then 4 zero bytes
	return out
}

// sameSchema says whether a and b encode alike: the same endianness,
// metadata in the same order, and fields of the same names, nullability,
// metadata and types (nested fields' metadata compared as maps, as
// arrow.TypeEqual does).
func sameSchema(a, b *arrow.Schema) bool {
	if a == b {
		return true
	}
	if a.NumFields() != b.NumFields() || a.Endianness() != b.Endianness() || !sameMetadata(a.Metadata(), b.Metadata()) {
		return false
	}
	for i := range a.NumFields() {
		fa, fb := a.Field(i), b.Field(i)
		if fa.Name != fb.Name || fa.Nullable != fb.Nullable || !sameMetadata(fa.Metadata, fb.Metadata) ||
			!arrow.TypeEqual(fa.Type, fb.Type, arrow.CheckMetadata()) {
			return false
		}
	}
	return true
}

// sameMetadata says whether a and b hold the same pairs in the same order
// (arrow.Metadata.Equal ignores the order, which the encoding keeps).
func sameMetadata(a, b arrow.Metadata) bool {
	return slices.Equal(a.Keys(), b.Keys()) && slices.Equal(a.Values(), b.Values())
}

// hash mixes what tells schemas apart; sameSchema decides.
func (c *schemaEncodings) hash(schema *arrow.Schema) uint64 {
	var h maphash.Hash
	h.SetSeed(c.seed)
	writeMetadata(&h, schema.Metadata())
	for i := range schema.NumFields() {
		f := schema.Field(i)
		h.WriteString(f.Name)
		h.WriteByte(0)
		if f.Nullable {
			h.WriteByte(1)
		}
		h.WriteString(f.Type.Fingerprint())
		h.WriteByte(0)
		writeMetadata(&h, f.Metadata)
	}
	return h.Sum64()
}

func writeMetadata(h *maphash.Hash, md arrow.Metadata) {
	for i := range md.Len() {
		h.WriteString(md.Keys()[i])
		h.WriteByte(0)
		h.WriteString(md.Values()[i])
		h.WriteByte(0)
	}
	h.WriteByte(1)
}

// hasDictionaries says whether a field of fields, or of their children, is
// dictionary encoded.
func hasDictionaries(fields []arrow.Field) bool {
	for _, f := range fields {
		if hasDictionary(f.Type) {
			return true
		}
	}
	return false
}

func hasDictionary(t arrow.DataType) bool {
	switch t := t.(type) {
	case *arrow.DictionaryType:
		return true
	case arrow.ExtensionType:
		return hasDictionary(t.StorageType())
	case arrow.NestedType:
		return hasDictionaries(t.Fields())
	}
	return false
}
