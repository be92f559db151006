package valkey_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/store/valkey"
)

// Example_changes builds an in-memory view of a collection and keeps it current from the change
// feed, as every Loom server sharing one Valkey does: note the feed's position, scan, then follow; on each
// change reload the document's current state (a late or repeated change is then harmless).
func Example_changes() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	opts, err := valkey.ParseURL("valkey://127.0.0.1:6379?prefix=loom")
	if err != nil {
		panic(err)
	}
	st, err := valkey.Open(ctx, opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	s, _ := st.Collections() // the native layout keeps collections
	c, err := s.GetCollection(ctx, "acme", "manuals")
	if err != nil {
		fmt.Println(err)
		return
	}
	seq, err := s.LastChange(ctx) // before the scan: nothing written during it is missed
	if err != nil {
		fmt.Println(err)
		return
	}
	index := map[string][]collection.Chunk{} // document id -> chunks
	err = s.ScanChunks(ctx, "acme", c.ID, func(ch collection.Chunk) error {
		index[ch.DocumentID] = append(index[ch.DocumentID], ch)
		return nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for ctx.Err() == nil {
		changes, err := s.Changes(ctx, seq, 100, time.Second)
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, ch := range changes {
			seq = ch.Seq
			if ch.Tenant != "acme" || ch.CollectionID != c.ID || ch.DocumentID == "" {
				continue
			}
			chunks, err := s.DocumentChunks(ctx, "acme", c.ID, ch.DocumentID)
			switch {
			case errors.Is(err, collection.ErrNotFound):
				delete(index, ch.DocumentID)
			case err == nil:
				index[ch.DocumentID] = chunks
			}
		}
	}
	fmt.Println(len(index), "documents")
}
