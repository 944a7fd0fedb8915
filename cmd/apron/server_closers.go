package main

import (
	"errors"
	"fmt"
	"sync"
)

// closers are what a server opened, in order; closeAll closes them in
// reverse order (a part closes before what it uses), each once.
type closers struct {
	mu struct {
		sync.Mutex
		list    []namedCloser
		closing string // the one closing now, for a shutdown cut short
	}
}

type namedCloser struct {
	name  string
	close func() error
}

func (c *closers) add(name string, close func() error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.list = append(c.mu.list, namedCloser{name, close})
}

// closeAll closes everything added, last first, and joins the errors,
// each naming its part.
func (c *closers) closeAll() error {
	var errs []error
	for {
		c.mu.Lock()
		n := len(c.mu.list)
		if n == 0 {
			c.mu.closing = ""
			c.mu.Unlock()
			return errors.Join(errs...)
		}
		next := c.mu.list[n-1]
		c.mu.list = c.mu.list[:n-1]
		c.mu.closing = next.name
		c.mu.Unlock()
		if err := next.close(); err != nil {
			errs = append(errs, fmt.Errorf("closing %s: %w", next.name, err))
		}
	}
}

// current names the part closing now.
func (c *closers) current() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closing == "" {
		return "nothing"
	}
	return c.mu.closing
}
