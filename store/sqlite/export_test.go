package sqlite

import (
	"context"
	"time"

	"github.com/context-loom/loom/store"
)

// OpenClock is Open with the backend's clock, now, in place of time.Now, for the tests of session expiry:
// they move the clock themselves instead of waiting for the wall clock to pass a TTL.
func OpenClock(ctx context.Context, opts Options, now func() time.Time) (*store.Store, error) {
	return openClock(ctx, opts, now)
}
