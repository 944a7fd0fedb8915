package catalog

// IfNotExists says what a write does when its table does not exist.
type IfNotExists int

const (
	// CreateTable creates the table (and its database) from the batch's
	// schema. It is the zero value.
	CreateTable IfNotExists = iota
	// FailIfNotExists rejects the write with ErrTableNotFound.
	FailIfNotExists
)

// IfExists says what a write does when its table already exists.
type IfExists int

const (
	// AppendIfExists appends to the table, adding new columns. It is the
	// zero value.
	AppendIfExists IfExists = iota
	// FailIfExists rejects the write with ErrTableExists.
	FailIfExists
)

// WriteOptions are the per-write choices of the client.
type WriteOptions struct {
	IfNotExists IfNotExists
	IfExists    IfExists
	// Replay is set when replaying the WAL: the write was accepted once, so
	// modes and limits (which may have been lowered since) are not checked
	// again. Types still are.
	Replay bool
	// Replace is the id (Replacing.ID) of the replace in progress the
	// write belongs to: it goes to the replace's new table, not to the
	// table of that name now (replace.go). 0: an ordinary write, which a
	// replace of its table in progress refuses.
	Replace uint64
}

// Change is what a write would do to the catalog. A nil *Change means the
// write fits the catalog as it is.
type Change struct {
	Database    string
	NewDatabase bool
	Table       string
	NewTable    bool
	// NewColumns are the columns to add, by name and logical type, in
	// first-seen order. For a new table they are all its columns, time
	// first. IDs are assigned by Apply; the ID field is ignored here.
	NewColumns []Column
	// Replace: the change is to the new table of the replace in progress
	// of Database.Table (replace.go), which NewTable creates.
	Replace bool
}
