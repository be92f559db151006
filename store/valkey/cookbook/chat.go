package cookbook

import (
	"context"

	valkeygo "github.com/valkey-io/valkey-go"

	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/valkey/internal/conn"
)

// chatPage reads up to size entries of the cookbook's chat list key before seq before (0: the newest),
// from the replies r of that read when it was sent already (nil: send it), and returns the messages and
// the before of the older entries. Entries decodeChat cannot read are left out.
func (c *Backend) chatPage(ctx context.Context, key string, before int64, size int, r []valkeygo.ValkeyResult) ([]store.Message, int64, error) {
	cmds, first := c.chatPageCmds(key, before, size)
	if r == nil {
		var err error
		if r, err = c.conn.DoMulti(ctx, cmds...); err != nil {
			return nil, 0, err
		}
	}
	var vals []string
	if before <= 0 { // MULTI, LLEN, LRANGE, EXEC: the length numbers the values
		arr, err := c.conn.ExecReplies(ctx, r[0], r[3], 2)
		if err != nil {
			return nil, 0, err
		}
		total, err := arr[0].AsInt64()
		if err != nil {
			return nil, 0, c.conn.Fail(ctx, err)
		}
		if vals, err = arr[1].AsStrSlice(); err != nil {
			return nil, 0, c.conn.Fail(ctx, err)
		}
		first = total - int64(len(vals)) + 1
	} else {
		var err error
		if vals, err = r[0].AsStrSlice(); err != nil {
			return nil, 0, c.conn.Fail(ctx, err)
		}
		if conn.PastEnd(first, size, len(vals)) { // past the newest entry: read from the newest
			return c.chatPage(ctx, key, 0, size, nil)
		}
	}
	return decodeChat(vals, first), conn.NextBefore(first), nil
}

// chatPageCmds are the commands of chatPage, and the seq of the first value when before says it.
func (c *Backend) chatPageCmds(key string, before int64, size int) ([]valkeygo.Completed, int64) {
	b := c.conn.Client.B()
	cmd, first := conn.LRange(b, key, before, size)
	if before > 0 {
		return []valkeygo.Completed{cmd}, first
	}
	return []valkeygo.Completed{b.Multi().Build(), b.Llen().Key(key).Build(), cmd, b.Exec().Build()}, 0
}

// readChat answers q (a checked query) on the cookbook's chat list key, by pages, the first from its
// replies r when they were sent already (nil: send them); it returns the before of the entries it left out.
func (c *Backend) readChat(ctx context.Context, key string, q store.MessageQuery, r []valkeygo.ValkeyResult) ([]store.Message, int64, error) {
	return store.ReadNewest(q, func(before int64, size int) ([]store.Message, int64, error) {
		pre := r
		r = nil
		return c.chatPage(ctx, key, before, size, pre)
	})
}
