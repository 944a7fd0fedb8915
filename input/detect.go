package input

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/influxdata/line-protocol/v2/lineprotocol"
)

// DetectHeadSize is how many leading bytes Detect wants to see.
const DetectHeadSize = 4096

// extFormats maps file extensions to formats. ".txt" is not here: it is as
// often line protocol as CSV, so the content decides.
var extFormats = map[string]Format{
	".csv":     CSV,
	".tsv":     TSV,
	".tab":     TSV,
	".jsonl":   JSONL,
	".ndjson":  JSONL,
	".json":    JSONL,
	".lp":      LineProtocol,
	".line":    LineProtocol,
	".influx":  LineProtocol,
	".parquet": Parquet,
	".pq":      Parquet,
	".arrow":   Arrow,
	".arrows":  Arrow,
	".feather": Arrow,
	".ipc":     Arrow,
}

// Detect picks the format of a file from its name's extension and, when
// that says nothing (stdin is "-", ".txt", no extension), from head, the
// file's first bytes (up to DetectHeadSize): Parquet and Arrow by their
// magic numbers, JSON Lines by a leading '{', line protocol when the first
// line that is not blank or a comment parses as an entry with a field,
// else CSV. Compressed files and JSON arrays are refused with what to do.
func Detect(name string, head []byte) (Format, error) {
	ext := strings.ToLower(filepath.Ext(name))
	switch ext {
	case ".gz", ".zst", ".bz2", ".xz", ".zip", ".lz4", ".snappy":
		return "", fmt.Errorf("%w: %s is compressed (%s); decompress it first, e.g. zcat %s | apron write … --format csv -", ErrFormat, name, ext, name)
	}
	if f, ok := extFormats[ext]; ok {
		return f, nil
	}
	return sniff(name, head)
}

func sniff(name string, head []byte) (Format, error) {
	switch {
	case bytes.HasPrefix(head, []byte("PAR1")):
		return Parquet, nil
	case bytes.HasPrefix(head, arrowFileMagic):
		return Arrow, nil
	case bytes.HasPrefix(head, []byte{0xFF, 0xFF, 0xFF, 0xFF}):
		return Arrow, nil // an IPC stream's first message
	case bytes.HasPrefix(head, []byte{0x1F, 0x8B}), bytes.HasPrefix(head, []byte{0x28, 0xB5, 0x2F, 0xFD}):
		return "", fmt.Errorf("%w: %s is compressed (gzip or zstd); decompress it first, e.g. zcat %s | apron write … -", ErrFormat, name, name)
	}
	text := bytes.TrimPrefix(head, bom)
	if bytes.IndexByte(text, 0) >= 0 {
		return "", fmt.Errorf("%w: %s looks binary and is none of Parquet or Arrow; pass --format", ErrFormat, name)
	}
	trimmed := bytes.TrimLeft(text, " \t\r\n")
	if len(trimmed) == 0 {
		return "", fmt.Errorf("%w: %s is empty, its format cannot be told; pass --format csv|tsv|jsonl|lp|parquet|arrow", ErrFormat, name)
	}
	switch trimmed[0] {
	case '{':
		return JSONL, nil
	case '[':
		return "", fmt.Errorf("%w: %s holds a JSON array; write one object per line (JSON Lines), e.g. jq -c '.[]' %s | apron write … --format jsonl -", ErrFormat, name, name)
	}
	if isLineProtocol(text) {
		return LineProtocol, nil
	}
	first := firstLine(text)
	if bytes.IndexByte(first, '\t') >= 0 && bytes.IndexByte(first, ',') < 0 {
		return TSV, nil
	}
	return CSV, nil
}

// isLineProtocol decodes the first entry of text.
func isLineProtocol(text []byte) bool {
	// Only whole lines: head may end in the middle of one.
	if i := bytes.LastIndexByte(text, '\n'); i >= 0 {
		text = text[:i+1]
	}
	d := lineprotocol.NewDecoderWithBytes(text)
	if !d.Next() {
		return false
	}
	if _, err := d.Measurement(); err != nil {
		return false
	}
	for {
		k, _, err := d.NextTag()
		if err != nil {
			return false
		}
		if k == nil {
			break
		}
	}
	k, _, err := d.NextField()
	if err != nil || k == nil {
		return false
	}
	for k != nil {
		if k, _, err = d.NextField(); err != nil {
			return false
		}
	}
	_, err = d.TimeBytes()
	return err == nil
}

func firstLine(text []byte) []byte {
	for len(text) > 0 {
		i := bytes.IndexByte(text, '\n')
		line := text
		if i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			text = nil
		}
		if len(bytes.TrimSpace(line)) > 0 {
			return line
		}
	}
	return nil
}
