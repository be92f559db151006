package valkey

import (
	"context"
	"strconv"
)

// Epoch implements collection.Epocher: it reads the run_id of every primary (see the notes on durability
// in servers.go) and returns a value that changes whenever one of them has restarted, or a new one has
// appeared, since Open: then writes the store acknowledged may be lost, and the search indexes built from
// the store must be rebuilt. It returns an error wrapping store.ErrUnavailable when no server can be
// reached, and store.ErrClosed after Close.
func (n *Backend) Epoch(ctx context.Context) (string, error) {
	e, err := n.conn.Check(ctx)
	if err != nil {
		return "", err
	}
	return strconv.FormatUint(e, 10), nil
}
