package engine

// Resyncs reports how often e's follower lost its place in the change feed and rebuilt its indexes.
func Resyncs(e *Engine) int {
	e.ix.mu.Lock()
	defer e.ix.mu.Unlock()
	return e.ix.resyncs
}

// IndexUsers reports how many callers hold the collection's index (searches, and callers waiting for its
// build); 0 when it is not loaded.
func IndexUsers(e *Engine, tenant, collection string) int {
	e.ix.mu.Lock()
	defer e.ix.mu.Unlock()
	if li := e.ix.m[indexKey{tenant, collection}]; li != nil {
		return li.refs
	}
	return 0
}

// AutoStrategy is autoStrategy, the strategy StrategyAuto chunks a document with.
var AutoStrategy = autoStrategy

// FlushCacheStates waits until the cache states handed to writers so far are written or failed.
func FlushCacheStates(e *Engine) { e.caches.wait() }
