package flightsvc

import (
	"crypto/rand"
	"fmt"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/util"

	"github.com/apron-db/apron/query"
)

// Prepared statement limits. A handle not used for preparedIdle is
// forgotten. One client (clientKey) holds at most preparedPerClient
// handles and preparedBytesPerClient bytes of SQL and bound parameters,
// one host preparedPerHost handles: past them its next Prepare (or bind)
// is refused, and nobody else's. All clients together hold at most
// preparedMax handles and preparedBytes bytes: past them, the least
// recently used handles of the client holding the most are forgotten
// first, and only if none has been idle for preparedEvictIdle is the new
// one refused.
const (
	preparedIdle           = time.Hour
	preparedPerClient      = 1000
	preparedBytesPerClient = 256 << 20
	preparedPerHost        = 10 * preparedPerClient
	preparedMax            = 100_000
	preparedBytes          = 1 << 30
	preparedEvictIdle      = time.Minute
)

// preparedStore holds the open prepared statements by handle, with the
// parameters last bound to each.
type preparedStore struct {
	idle      time.Duration
	perClient int
	perBytes  int64
	perHost   int
	max       int
	maxBytes  int64
	now       func() time.Time
	mu        struct {
		sync.Mutex
		m       map[string]*prepared
		clients map[string]*clientUsage
		hosts   map[string]int // handles by host
		bytes   int64
		swept   time.Time // last sweep of expired handles
	}
}

type prepared struct {
	st     *query.Statement
	client string
	host   string
	owner  string            // the token id that made it ("" without authentication)
	params arrow.RecordBatch // bound by DoPut; nil if none (guarded by the store's mu)
	bytes  int64             // the SQL and the parameters
	used   time.Time
}

// clientUsage is what one client holds.
type clientUsage struct {
	handles map[string]*prepared
	bytes   int64
}

func newPreparedStore() *preparedStore {
	p := &preparedStore{idle: preparedIdle, perClient: preparedPerClient, perBytes: preparedBytesPerClient,
		perHost: preparedPerHost, max: preparedMax, maxBytes: preparedBytes, now: time.Now}
	p.mu.m = make(map[string]*prepared)
	p.mu.clients = make(map[string]*clientUsage)
	p.mu.hosts = make(map[string]int)
	return p
}

// add stores st for client, of host, under a new handle that only owner
// (a token id) may use.
func (p *preparedStore) add(client, host, owner string, st *query.Statement) (string, error) {
	handle := rand.Text()
	size := int64(0)
	if st != nil {
		size = int64(len(st.SQL))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	// Sweep expired handles (releasing their parameters) now and then.
	if now.Sub(p.mu.swept) > time.Minute {
		p.mu.swept = now
		for h, e := range p.mu.m {
			if now.Sub(e.used) > p.idle {
				p.dropLocked(h, e)
			}
		}
	}
	u := p.mu.clients[client]
	if u != nil && len(u.handles) >= p.perClient {
		return "", fmt.Errorf("%w: this client holds %d open prepared statements, the most one client may (others are not affected); close some (ClosePreparedStatement, or close the statement objects) or let them expire after %s idle",
			errResourceExhausted, len(u.handles), p.idle)
	}
	if p.mu.hosts[host] >= p.perHost {
		return "", fmt.Errorf("%w: the clients of this host hold %d open prepared statements, the most one host may (others are not affected); close some",
			errResourceExhausted, p.mu.hosts[host])
	}
	if u != nil && u.bytes+size > p.perBytes {
		return "", fmt.Errorf("%w: this client's open prepared statements hold %d bytes of SQL and parameters, the most one client may is %d; close some",
			errResourceExhausted, u.bytes, p.perBytes)
	}
	for len(p.mu.m) >= p.max || p.mu.bytes+size > p.maxBytes {
		if !p.evictLocked(now) {
			return "", fmt.Errorf("%w: %d prepared statements (%d bytes) are open on the server, none idle for %s; try again later",
				errResourceExhausted, len(p.mu.m), p.mu.bytes, preparedEvictIdle)
		}
	}
	if u == nil {
		u = &clientUsage{handles: map[string]*prepared{}}
		p.mu.clients[client] = u
	}
	e := &prepared{st: st, client: client, host: host, owner: owner, bytes: size, used: now}
	p.mu.m[handle] = e
	p.mu.hosts[host]++
	u.handles[handle] = e
	u.bytes += size
	p.mu.bytes += size
	return handle, nil
}

// evictLocked forgets the least recently used handle, idle for at least
// preparedEvictIdle, of the client holding the most handles that has one;
// false if there is none.
func (p *preparedStore) evictLocked(now time.Time) bool {
	var victims []*clientUsage
	for _, u := range p.mu.clients {
		victims = append(victims, u)
	}
	for len(victims) > 0 {
		top := 0
		for i, u := range victims {
			if len(u.handles) > len(victims[top].handles) {
				top = i
			}
		}
		var oldest string
		var oldestUsed time.Time
		for h, e := range victims[top].handles {
			if now.Sub(e.used) >= preparedEvictIdle && (oldest == "" || e.used.Before(oldestUsed)) {
				oldest, oldestUsed = h, e.used
			}
		}
		if oldest != "" {
			p.dropLocked(oldest, p.mu.m[oldest])
			return true
		}
		victims = append(victims[:top], victims[top+1:]...)
	}
	return false
}

func (p *preparedStore) dropLocked(h string, e *prepared) {
	if e.params != nil {
		e.params.Release()
	}
	delete(p.mu.m, h)
	p.mu.bytes -= e.bytes
	if p.mu.hosts[e.host]--; p.mu.hosts[e.host] <= 0 {
		delete(p.mu.hosts, e.host)
	}
	if u := p.mu.clients[e.client]; u != nil {
		delete(u.handles, h)
		u.bytes -= e.bytes
		if len(u.handles) == 0 {
			delete(p.mu.clients, e.client)
		}
	}
}

// get returns the statement and its bound parameters (retained: the
// caller releases them).
func (p *preparedStore) get(handle []byte, owner string) (*query.Statement, arrow.RecordBatch, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.mu.m[string(handle)]
	now := p.now()
	if ok && now.Sub(e.used) > p.idle {
		p.dropLocked(string(handle), e)
		ok = false
	}
	if !ok {
		return nil, nil, fmt.Errorf("%w: prepared statement %q is not open (closed, or idle for more than %s, or the server restarted); prepare it again",
			errNotFound, handle, p.idle)
	}
	if e.owner != owner {
		return nil, nil, errNotOwner("prepared statement")
	}
	e.used = now
	if e.params != nil {
		e.params.Retain()
	}
	return e.st, e.params, nil
}

// bind replaces the parameters of a statement; it takes ownership of
// params.
func (p *preparedStore) bind(handle []byte, owner string, params arrow.RecordBatch) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.mu.m[string(handle)]
	if !ok || e.owner != owner {
		if params != nil {
			params.Release()
		}
		if ok {
			return errNotOwner("prepared statement")
		}
		return fmt.Errorf("%w: prepared statement %q is not open; prepare it again", errNotFound, handle)
	}
	var size int64
	if params != nil {
		size = util.TotalRecordSize(params)
	}
	old := int64(0)
	if e.params != nil {
		old = util.TotalRecordSize(e.params)
	}
	u := p.mu.clients[e.client]
	if grow := size - old; grow > 0 && (u.bytes+grow > p.perBytes || p.mu.bytes+grow > p.maxBytes) {
		if params != nil {
			params.Release()
		}
		return fmt.Errorf("%w: binding %d bytes of parameters would take this client's prepared statements past %d bytes (or the server's past %d); bind fewer rows at a time",
			errResourceExhausted, size, p.perBytes, p.maxBytes)
	}
	if e.params != nil {
		e.params.Release()
	}
	e.params = params
	e.bytes += size - old
	u.bytes += size - old
	p.mu.bytes += size - old
	e.used = p.now()
	return nil
}

func (p *preparedStore) close(handle []byte, owner string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.mu.m[string(handle)]
	if ok && e.owner != owner {
		return errNotOwner("prepared statement")
	}
	if ok {
		p.dropLocked(string(handle), e)
	}
	return nil
}

// open is the number of handles held (apron_prepared_statements),
// expired ones not yet swept included.
func (p *preparedStore) open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.mu.m)
}

func (p *preparedStore) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for h, e := range p.mu.m {
		p.dropLocked(h, e)
	}
}
