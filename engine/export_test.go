package engine

// Resyncs reports how often e's follower lost its place in the change feed and rebuilt its indexes.
func Resyncs(e *Engine) int {
	e.ix.mu.Lock()
	defer e.ix.mu.Unlock()
	return e.ix.resyncs
}
