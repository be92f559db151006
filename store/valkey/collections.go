package valkey

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/valkey/internal/conn"
)

// Collections in the native layout
//
// Every key of one collection shares the hash tag {t:<tenant>:c:<collection id>}, so each write to a
// collection is one script on one slot (atomic, and valid on a cluster):
//
//	loom:{t:<tenant>:c:<id>}:meta    hash: "c" -> the collection as JSON (Dimensions left out),
//	                                 "dims" -> its vectors' length ("0" until the first vectors),
//	                                 "gen" -> the generation of the index entry it was written for
//	loom:{t:<tenant>:c:<id>}:docs    hash: document id -> the document as JSON (its metadata included)
//	loom:{t:<tenant>:c:<id>}:chunks  hash: document id -> all of the document's chunks as one binary value
//	                                 (see chunkcodec.go; vectors as little-endian float32, and of the
//	                                 metadata each chunk's own keys alone: reads merge the document's)
//	loom:{t:<tenant>}:colls          hash, the tenant's index: "n:<name>" -> id, "i:<id>" -> name,
//	                                 "g:<id>" -> the entry's generation, and "gen" -> the last one given
//	loom:changes                     stream: the change feed of the whole deployment (one per prefix)
//
// A document's chunks are one hash field rather than a key of their own, so that deleting a collection is
// one UNLINK of three keys (nothing to enumerate) and ScanChunks is an HSCAN of one key, a batch of
// documents per reply.
//
// Creating and deleting a collection touch two slots (the tenant's index and the collection's keys), so
// they are two steps, and a lost connection or a crash between them leaves a collection half made. The
// index decides: a collection exists when the index has its entry and its meta was written for that entry,
// told by the generation both hold (a number the index counts up, one per entry; "0" where either lacks
// it, as collections made before generations have). Creation reserves the name and id in the index, which
// gives the entry its generation (one script: of concurrent creates exactly one gets the entry), then
// writes the meta for that generation, replacing what the collection's keys held unless it is a meta of
// that generation or a later one.
//
// A create that finds its own entry already there (the same name and id) does the second step for that
// entry: a retry after a lost reply completes a half-made collection, and of two concurrent identical
// creates the one whose meta lands first succeeds and the other fails with collection.ErrExists, as a
// create of a collection that exists does. A create that clashes with another entry whose collection is
// half made (a create given no id is given a new one each time, so its retry clashes by name) removes that
// entry and tries again: it first writes a fence to the entry's meta, a meta that holds the generation
// alone, so that the create cut short cannot complete its collection after the entry is gone (its second
// step finds a meta of its generation and fails with collection.ErrExists); reads take no collection from
// a fence, and the next create of its id replaces it.
//
// Keys of an earlier generation (the meta of a create or a deletion cut short, with whatever documents it
// had) are therefore never seen through the index, and the next create of the id replaces them; a
// document put straight into such keys (the document calls check the meta alone; the engine finds a
// collection through the index first) goes with them. A collection half made has no meta, so the document
// calls find no collection. Deletion removes the index entry and then the keys, unless they were written
// for an entry made since; deleting the id again removes keys a deletion cut short left, and deleting a
// collection half made removes its entry. The tenant's index keeps its counter ("gen") when its last
// collection is deleted, so that generations only grow: a server that loses the index but keeps a
// collection's keys (a cluster failing over to a replica that lagged) can give a generation again, and a
// create of such an id then meets the kept keys as the collection of that id (collection.ErrExists)
// until the id is deleted.
//
// The change feed. Every put and delete of a document and every deleted collection adds an entry to the
// stream (XADD MAXLEN ~ store.Options.ChangesKept) whose id is the change's Seq. On a standalone server (or
// behind Sentinel) the entry is added by the same script that writes the collection, so the feed has exactly
// one entry per change, in the order of the writes, and no reader sees one without the other. On a cluster
// the stream lives in a slot of its own, which a script on the collection's slot cannot touch: the entry is
// added right after the write succeeds. Then entries of concurrent writes may come in another order than the
// writes, a reader may see a write before its entry, and a crash (or a lost connection) between the write and
// the XADD loses the entry: the write is stored, the call returns an error that says so (wrapping
// store.ErrUnavailable when the server could not be reached), a retried put of the same document is a no-op
// that adds no entry either, and other servers' indexes miss the change until the next change of that
// document or until they rebuild (at start). A reader must therefore treat an entry as "this document may
// have changed" and reload the document's current state; a late or duplicated entry is then harmless.
//
// The stream keeps about store.Options.ChangesKept entries (XADD MAXLEN ~, store.DefaultChangesKept by
// default); a reader that falls further behind gets collection.ErrFeedTrimmed, told by the stream's
// first entry (XINFO STREAM), and rebuilds from ScanChunks.

// scanBatch is the COUNT of the HSCANs of ScanChunks and ListDocuments: about how many documents one reply
// holds.
const scanBatch = 64

// collKeys are the keys of one collection; they share a hash tag.
type collKeys struct{ meta, docs, chunks string }

func (n *Backend) coll(tenant, id string) collKeys {
	base := n.prefix + ":{t:" + escape(tenant) + ":c:" + escape(id) + "}:"
	return collKeys{base + "meta", base + "docs", base + "chunks"}
}

func (n *Backend) collIndex(tenant string) string {
	return n.prefix + ":{t:" + escape(tenant) + "}:colls"
}

func (n *Backend) changesKey() string { return n.prefix + ":changes" }

// feedInScript reports whether write scripts add their change to the stream themselves: everywhere but on
// a cluster, where the stream's slot is not the collection's.
func (n *Backend) feedInScript() bool { return n.conn.Client.Mode() != valkeygo.ClientModeCluster }

// eval runs a script and returns its reply; a server error is returned (mapped) as the error.
func (n *Backend) eval(ctx context.Context, s *valkeygo.Lua, keys, args []string) (valkeygo.ValkeyMessage, error) {
	cctx, cancel, err := n.conn.Call(ctx)
	if err != nil {
		return valkeygo.ValkeyMessage{}, n.conn.Fail(ctx, err)
	}
	defer cancel()
	m, err := s.Exec(cctx, n.conn.Client, keys, args).ToMessage()
	if err != nil {
		return m, n.conn.Fail(ctx, err)
	}
	return m, nil
}

// The scripts that write a collection add the change (XADD <stream> MAXLEN ~ <max> * tenant <t> coll <c>
// doc <d> op <op>) when they are given the stream as their last key, before they write anything else:
// a script is not rolled back when a command in it fails, and the XADD is the one that can (out of
// memory, say), so a failure writes nothing.

// reserveName enters a collection in the tenant's index, under the next generation, unless its name or id is
// the name or id of a collection there (names and ids are one namespace: GetCollection takes either).
// KEYS[1] is the index; ARGV the name and the id. It returns the entry's generation, {"same", "", its
// generation} if the index has this very entry (the same name for the same id), or what clashed and the
// generation of the entry it clashed with: {"name", the id of the collection of that name, gen}, {"id",
// the name of the collection of that id, gen}, {"id-name", the id of the collection named the new id,
// gen} or {"name-id", the name of the collection whose id is the new name, gen}.
var reserveName = valkeygo.NewLuaScript(`
local function gen(id) return redis.call('HGET', KEYS[1], 'g:' .. id) or '0' end
local byName = redis.call('HGET', KEYS[1], 'n:' .. ARGV[1])
local byID = redis.call('HGET', KEYS[1], 'i:' .. ARGV[2])
if byName == ARGV[2] and byID == ARGV[1] then return {'same', '', gen(ARGV[2])} end
if byName then return {'name', byName, gen(byName)} end
if byID then return {'id', byID, gen(ARGV[2])} end
local have = redis.call('HGET', KEYS[1], 'n:' .. ARGV[2])
if have then return {'id-name', have, gen(have)} end
have = redis.call('HGET', KEYS[1], 'i:' .. ARGV[1])
if have then return {'name-id', have, gen(ARGV[1])} end
local next = redis.call('HINCRBY', KEYS[1], 'gen', 1)
redis.call('HSET', KEYS[1], 'n:' .. ARGV[1], ARGV[2], 'i:' .. ARGV[2], ARGV[1], 'g:' .. ARGV[2], next)
return next
`)

// createMeta writes a collection's meta for an index entry of generation ARGV[3], replacing the keys of an
// earlier generation (a collection half made or half deleted), unless the meta is of this generation or a
// later one. KEYS are the collection's meta, docs and chunks; ARGV its JSON, its dimensions and the
// generation. It returns 1, or the JSON the meta holds ("" for a fence). With no JSON it writes a fence:
// a meta that holds the generation alone, which no create of that generation can then complete (its
// entry is about to be removed) and no read takes for a collection.
var createMeta = valkeygo.NewLuaScript(`
if redis.call('EXISTS', KEYS[1]) == 1 and tonumber(redis.call('HGET', KEYS[1], 'gen') or '0') >= tonumber(ARGV[3]) then
  return redis.call('HGET', KEYS[1], 'c') or ''
end
redis.call('UNLINK', KEYS[1], KEYS[2], KEYS[3])
if ARGV[1] == '' then
  redis.call('HSET', KEYS[1], 'gen', ARGV[3])
else
  redis.call('HSET', KEYS[1], 'c', ARGV[1], 'dims', ARGV[2], 'gen', ARGV[3])
end
return 1
`)

// swapMeta replaces a collection's JSON if it is still the one read. KEYS[1] is the meta; ARGV the JSON read
// and the new one. It returns 1, or 0 if the meta holds other JSON or none.
var swapMeta = valkeygo.NewLuaScript(`
if redis.call('HGET', KEYS[1], 'c') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'c', ARGV[2])
return 1
`)

// unreserveName removes a collection from the tenant's index. KEYS[1] is the index; ARGV the id and, if
// not "", the generation the entry must have. It returns {1 if the entry was there (and removed) else 0,
// the index's last generation}: keys of a later one belong to a collection created since.
var unreserveName = valkeygo.NewLuaScript(`
local gen = redis.call('HGET', KEYS[1], 'gen') or '0'
local name = redis.call('HGET', KEYS[1], 'i:' .. ARGV[1])
if not name then return {0, gen} end
if ARGV[2] ~= '' and (redis.call('HGET', KEYS[1], 'g:' .. ARGV[1]) or '0') ~= ARGV[2] then return {0, gen} end
redis.call('HDEL', KEYS[1], 'i:' .. ARGV[1], 'g:' .. ARGV[1])
if redis.call('HGET', KEYS[1], 'n:' .. name) == ARGV[1] then redis.call('HDEL', KEYS[1], 'n:' .. name) end
return {1, gen}
`)

// dropCollection removes a collection's keys unless their meta is of a generation later than the index's
// last when the entry was removed (a collection created since). KEYS are its meta, docs and chunks (and the
// stream); ARGV: tenant, id, "1" if the index had it, the stream's MAXLEN, that last generation. It returns
// 0 if there was nothing to remove, else 1 or the change's stream id.
var dropCollection = valkeygo.NewLuaScript(`
local newer = tonumber(redis.call('HGET', KEYS[1], 'gen') or '0') > tonumber(ARGV[5])
if (newer or redis.call('EXISTS', KEYS[1], KEYS[2], KEYS[3]) == 0) and ARGV[3] ~= '1' then return 0 end
local id = 1
if #KEYS == 4 then
  id = redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[4], '*', 'tenant', ARGV[1], 'coll', ARGV[2], 'doc', '', 'op', 'delete_collection')
end
if not newer then redis.call('UNLINK', KEYS[1], KEYS[2], KEYS[3]) end
return id
`)

// putDocument replaces a document and its chunks unless the stored one has the same hash, and sets the
// collection's dimensions on its first vectors. KEYS are the collection's meta, docs and chunks (and the
// stream); ARGV: document id, hash, document JSON, chunks, dimensions (0: no vectors), tenant, collection
// id, the stream's MAXLEN. It returns {-1} if the collection does not exist, {-2, dims} for vectors of
// another length than the collection's dims, {0} if unchanged, else {1} or {1, the change's stream id}.
var putDocument = valkeygo.NewLuaScript(`
local dims = redis.call('HGET', KEYS[1], 'dims')
if not dims then return {-1} end
local old = redis.call('HGET', KEYS[2], ARGV[1])
if old and cjson.decode(old)['hash'] == ARGV[2] then return {0} end
local want = tonumber(ARGV[5])
if want > 0 then
  local have = tonumber(dims)
  if have == 0 then
    redis.call('HSET', KEYS[1], 'dims', ARGV[5])
  elseif have ~= want then
    return {-2, have}
  end
end
local out = {1}
if #KEYS == 4 then
  out[2] = redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[8], '*', 'tenant', ARGV[6], 'coll', ARGV[7], 'doc', ARGV[1], 'op', 'put')
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[4])
return out
`)

// deleteDocument removes a document and its chunks. KEYS are the collection's docs and chunks (and the
// stream); ARGV: document id, tenant, collection id, the stream's MAXLEN. It returns 0 if there was no such
// document, else 1 or the change's stream id.
var deleteDocument = valkeygo.NewLuaScript(`
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
local id = 1
if #KEYS == 3 then
  id = redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[4], '*', 'tenant', ARGV[2], 'coll', ARGV[3], 'doc', ARGV[1], 'op', 'delete')
end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return id
`)

// readChunks reads a document and its chunks at once. KEYS are the collection's docs and chunks; ARGV[1]
// the document id. It returns {the document's JSON, its chunks}, each nil if missing.
var readChunks = valkeygo.NewLuaScriptReadOnly(`
return {redis.call('HGET', KEYS[1], ARGV[1]), redis.call('HGET', KEYS[2], ARGV[1])}
`)

// scanChunks reads one HSCAN page of a collection's chunks and their documents at once. KEYS are the
// collection's chunks, docs and meta; ARGV the cursor and the COUNT. It returns {-1} if the collection does
// not exist, else {the next cursor, then per document: its id, its chunks, its JSON (nil if missing)}.
var scanChunks = valkeygo.NewLuaScriptReadOnly(`
if redis.call('HEXISTS', KEYS[3], 'c') == 0 then return {-1} end
local page = redis.call('HSCAN', KEYS[1], ARGV[1], 'COUNT', ARGV[2])
local out = {page[1]}
local fields = page[2]
for i = 1, #fields, 2 do
  out[#out + 1] = fields[i]
  out[#out + 1] = fields[i + 1]
  out[#out + 1] = redis.call('HGET', KEYS[2], fields[i])
end
return out
`)

// publish adds a change to the stream (on a cluster, after the write).
func (n *Backend) publish(ctx context.Context, tenant, coll, doc, op string) error {
	r, err := n.conn.Do(ctx, n.conn.Client.B().Xadd().Key(n.changesKey()).Maxlen().Almost().Threshold(n.maxLen).Id("*").
		FieldValue().FieldValue("tenant", tenant).FieldValue("coll", coll).FieldValue("doc", doc).FieldValue("op", op).Build())
	if err == nil {
		err = n.conn.Fail(ctx, r.Error())
	}
	if err != nil {
		return fmt.Errorf("the %s of %s/%s is stored but its change was not published: %w", op, coll, doc, err)
	}
	return nil
}

// CreateCollection implements store.CollectionBackend. It returns collection.ErrExists if c's name or id
// is the name or id of one of the tenant's collections. A create whose reply was lost may have been
// done, in part or in full: retried, it completes a collection half made, and fails with
// collection.ErrExists if the first attempt completed it. A collection half made never blocks a name or
// id: a create that clashes with one removes it (see the notes on the layout above).
func (n *Backend) CreateCollection(ctx context.Context, tenant string, c loom.Collection) (loom.Collection, error) {
	stored := c
	stored.Dimensions = 0
	b, err := json.Marshal(stored)
	if err != nil {
		return loom.Collection{}, fmt.Errorf("valkey: encode collection %q: %w", c.Name, err)
	}
	// A name and an id can clash with two entries, and a concurrent create can make a new one while a
	// half-made one is removed: a few rounds, then the clash stands.
	var gen string
	for round := 0; gen == ""; round++ {
		// An error here may hide a reservation that was made: the entry stays, invisible without its
		// meta, and a retry finds it as its own.
		m, err := n.eval(ctx, reserveName, []string{n.collIndex(tenant)}, []string{c.Name, c.ID})
		if err != nil {
			return loom.Collection{}, err
		}
		if m.IsInt64() {
			g, _ := m.AsInt64()
			gen = strconv.FormatInt(g, 10)
			continue
		}
		clash, err := m.AsStrSlice()
		if err != nil || len(clash) != 3 {
			return loom.Collection{}, n.conn.Fail(ctx, fmt.Errorf("reserveName returned %v: %w", m, err))
		}
		var have loom.Collection
		switch clash[0] {
		case "same": // this create's own entry, from an earlier attempt or a concurrent one: createMeta decides
			gen = clash[2]
			continue
		case "name":
			have = loom.Collection{ID: clash[1], Name: c.Name}
		case "id":
			have = loom.Collection{ID: c.ID, Name: clash[1]}
		case "id-name":
			have = loom.Collection{ID: clash[1], Name: c.ID}
		default: // "name-id"
			have = loom.Collection{ID: c.Name, Name: clash[1]}
		}
		if round == 3 {
			return loom.Collection{}, collection.ClashError(c, have)
		}
		if removed, err := n.removeHalfMade(ctx, tenant, have.ID, clash[2]); err != nil || !removed {
			return loom.Collection{}, cmp.Or(err, collection.ClashError(c, have))
		}
	}
	k := n.coll(tenant, c.ID)
	m, err := n.eval(ctx, createMeta, []string{k.meta, k.docs, k.chunks}, []string{string(b), strconv.Itoa(c.Dimensions), gen})
	if err != nil {
		return loom.Collection{}, err
	}
	if m.IsInt64() {
		return c, nil
	}
	// The meta was written for this entry by another attempt (the collection exists), for a later entry
	// (this one was deleted and the id created again meanwhile), or fenced by a create that found this
	// entry half made.
	js, err := m.ToString()
	if err != nil {
		return loom.Collection{}, n.conn.Fail(ctx, err)
	}
	have := loom.Collection{Name: c.Name}
	_ = json.Unmarshal([]byte(js), &have) // the name is for the message only
	have.ID = c.ID
	return loom.Collection{}, collection.ClashError(c, have)
}

// removeHalfMade removes the index entry of id if it is of generation gen and its collection half made (no
// meta of that generation): it fences the meta first, so that the create that made the entry cannot
// complete it once it is gone. It reports whether the entry is gone; false means the collection exists.
func (n *Backend) removeHalfMade(ctx context.Context, tenant, id, gen string) (bool, error) {
	k := n.coll(tenant, id)
	m, err := n.eval(ctx, createMeta, []string{k.meta, k.docs, k.chunks}, []string{"", "0", gen})
	if err != nil {
		return false, err
	}
	if !m.IsInt64() {
		js, err := m.ToString()
		if err != nil {
			return false, n.conn.Fail(ctx, err)
		}
		if js != "" { // a meta of that generation (or a later one): the collection exists
			return false, nil
		}
		// A fence already: another create is removing the entry; removing it again is harmless.
	}
	if _, err := n.eval(ctx, unreserveName, []string{n.collIndex(tenant)}, []string{id, gen}); err != nil {
		return false, err
	}
	return true, nil
}

// metaCmd reads a collection's meta.
func (n *Backend) metaCmd(k collKeys) valkeygo.Completed {
	return n.conn.Client.B().Hmget().Key(k.meta).Field("c", "dims", "gen").Build()
}

// decodeMeta decodes an HMGET of a collection's meta (metaCmd) as the collection of the index entry of
// generation gen ("" read as "0"); ok is false if there is none, or if the meta was written for another
// entry (keys of an earlier generation, or of one made since the index was read).
func (n *Backend) decodeMeta(ctx context.Context, r valkeygo.ValkeyResult, gen string) (c loom.Collection, ok bool, err error) {
	vals, err := r.ToArray()
	if err != nil {
		return c, false, n.conn.Fail(ctx, err)
	}
	if len(vals) != 3 || vals[0].IsNil() {
		return c, false, nil
	}
	have := "0"
	if !vals[2].IsNil() {
		if have, err = vals[2].ToString(); err != nil {
			return c, false, n.conn.Fail(ctx, err)
		}
	}
	if have != cmp.Or(gen, "0") {
		return c, false, nil
	}
	js, err := vals[0].ToString()
	if err != nil {
		return c, false, n.conn.Fail(ctx, err)
	}
	if err := json.Unmarshal([]byte(js), &c); err != nil {
		return c, false, fmt.Errorf("valkey: decode collection: %w", err)
	}
	if !vals[1].IsNil() {
		d, err := vals[1].ToString()
		if err != nil {
			return c, false, n.conn.Fail(ctx, err)
		}
		if c.Dimensions, err = strconv.Atoi(d); err != nil {
			return c, false, fmt.Errorf("valkey: decode dimensions of collection %q: %w", c.ID, err)
		}
	}
	return c, true, nil
}

// GetCollection implements store.CollectionBackend: collection.ErrNotFound if the tenant has no collection of
// that id or name.
func (n *Backend) GetCollection(ctx context.Context, tenant, idOrName string) (loom.Collection, error) {
	index := n.collIndex(tenant)
	b := n.conn.Client.B()
	rs, err := n.conn.DoMulti(ctx, b.Hmget().Key(index).Field("i:"+idOrName, "g:"+idOrName, "n:"+idOrName).Build(),
		n.metaCmd(n.coll(tenant, idOrName)))
	if err != nil {
		return loom.Collection{}, err
	}
	entry, err := rs[0].ToArray()
	if err == nil && len(entry) != 3 {
		err = fmt.Errorf("HMGET returned %d values", len(entry))
	}
	if err != nil {
		return loom.Collection{}, n.conn.Fail(ctx, err)
	}
	if !entry[0].IsNil() { // idOrName is an id
		gen, _ := entry[1].ToString()
		c, ok, err := n.decodeMeta(ctx, rs[1], gen)
		if err != nil || ok {
			return c, err
		}
	}
	if entry[2].IsNil() {
		return loom.Collection{}, fmt.Errorf("collection %q: %w", idOrName, collection.ErrNotFound)
	}
	id, err := entry[2].ToString()
	if err != nil {
		return loom.Collection{}, n.conn.Fail(ctx, err)
	}
	rs, err = n.conn.DoMulti(ctx, b.Hget().Key(index).Field("g:"+id).Build(), n.metaCmd(n.coll(tenant, id)))
	if err != nil {
		return loom.Collection{}, err
	}
	gen, err := rs[0].ToString()
	if err != nil && !valkeygo.IsValkeyNil(err) {
		return loom.Collection{}, n.conn.Fail(ctx, err)
	}
	c, ok, err := n.decodeMeta(ctx, rs[1], gen)
	if err == nil && !ok {
		err = fmt.Errorf("collection %q: %w", idOrName, collection.ErrNotFound)
	}
	return c, err
}

// AllCollections implements store.CollectionBackend: a SCAN of every node for the tenants' index hashes
// (MATCH <prefix>:{t:*}:colls, so once through the keyspace), then their ids, in pipelines.
func (n *Backend) AllCollections(ctx context.Context) ([]collection.Ref, error) {
	head, tail := n.prefix+":{t:", "}:colls"
	pattern := conn.GlobEscape(head) + "*" + conn.GlobEscape(tail)
	tenants := map[string]string{} // index key -> tenant
	for _, node := range n.conn.Client.Nodes() {
		for cursor := uint64(0); ; {
			// Each page is a call of its own, under its own timeout: the whole keyspace may take long.
			cctx, cancel, err := n.conn.Call(ctx)
			if err != nil {
				return nil, n.conn.Fail(ctx, err)
			}
			e, err := node.Do(cctx, node.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Type("hash").Build()).AsScanEntry()
			cancel()
			if err != nil {
				return nil, n.conn.Fail(ctx, err)
			}
			for _, k := range e.Elements {
				escaped := strings.TrimSuffix(strings.TrimPrefix(k, head), tail)
				// The key must be exactly a tenant's index: an escaped tenant has no ':', '{' or '}'.
				if t, ok := unescape(escaped); ok && n.collIndex(t) == k {
					tenants[k] = t
				}
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	keys := slices.Sorted(maps.Keys(tenants))
	var out []collection.Ref
	for batch := range slices.Chunk(keys, 256) {
		cmds := make([]valkeygo.Completed, len(batch))
		for i, k := range batch {
			cmds[i] = n.conn.Client.B().Hkeys().Key(k).Build()
		}
		rs, err := n.conn.DoMulti(ctx, cmds...)
		if err != nil {
			return nil, err
		}
		for i, r := range rs {
			fields, err := r.AsStrSlice()
			if err != nil {
				return nil, n.conn.Fail(ctx, err)
			}
			for _, f := range fields {
				if id, ok := strings.CutPrefix(f, "i:"); ok {
					out = append(out, collection.Ref{Tenant: tenants[batch[i]], ID: id})
				}
			}
		}
	}
	slices.SortFunc(out, collection.CompareRefs)
	return out, nil
}

// ListCollections implements store.CollectionBackend.
func (n *Backend) ListCollections(ctx context.Context, tenant string) ([]loom.Collection, error) {
	r, err := n.conn.Do(ctx, n.conn.Client.B().Hgetall().Key(n.collIndex(tenant)).Build())
	if err != nil {
		return nil, err
	}
	index, err := r.AsStrMap()
	if err != nil {
		return nil, n.conn.Fail(ctx, err)
	}
	var cmds []valkeygo.Completed
	var gens []string
	for f := range index {
		if id, ok := strings.CutPrefix(f, "i:"); ok {
			cmds = append(cmds, n.metaCmd(n.coll(tenant, id)))
			gens = append(gens, index["g:"+id])
		}
	}
	if len(cmds) == 0 {
		return nil, nil
	}
	rs, err := n.conn.DoMulti(ctx, cmds...)
	if err != nil {
		return nil, err
	}
	out := make([]loom.Collection, 0, len(rs))
	for i, r := range rs {
		c, ok, err := n.decodeMeta(ctx, r, gens[i])
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b loom.Collection) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// SetFusionWeights implements store.CollectionBackend: collection.ErrNotFound if the tenant has no
// collection of the id. It rewrites the collection's JSON if no other write changed it since it was read,
// and reads it again otherwise.
func (n *Backend) SetFusionWeights(ctx context.Context, tenant, id string, keyword, vector *float64) (loom.Collection, error) {
	k := n.coll(tenant, id)
	for {
		c, err := n.GetCollection(ctx, tenant, id)
		if err == nil && c.ID != id { // id is the name of another collection
			err = fmt.Errorf("collection %q: %w", id, collection.ErrNotFound)
		}
		if err != nil {
			return loom.Collection{}, err
		}
		old, err := n.conn.Do(ctx, n.conn.Client.B().Hget().Key(k.meta).Field("c").Build())
		if err != nil {
			return loom.Collection{}, err
		}
		oldJSON, err := old.ToString()
		if valkeygo.IsValkeyNil(err) {
			return loom.Collection{}, fmt.Errorf("collection %q: %w", id, collection.ErrNotFound)
		} else if err != nil {
			return loom.Collection{}, n.conn.Fail(ctx, err)
		}
		stored := c
		stored.Dimensions, stored.KeywordWeight, stored.VectorWeight = 0, keyword, vector
		b, err := json.Marshal(stored)
		if err != nil {
			return loom.Collection{}, fmt.Errorf("valkey: encode collection %q: %w", c.Name, err)
		}
		m, err := n.eval(ctx, swapMeta, []string{k.meta}, []string{oldJSON, string(b)})
		if err != nil {
			return loom.Collection{}, err
		}
		if swapped, err := m.AsInt64(); err != nil {
			return loom.Collection{}, n.conn.Fail(ctx, err)
		} else if swapped == 1 {
			c.KeywordWeight, c.VectorWeight = keyword, vector
			return c, nil
		}
		if err := ctx.Err(); err != nil {
			return loom.Collection{}, err
		}
	}
}

// DeleteCollection implements store.CollectionBackend: collection.ErrNotFound if there is none.
func (n *Backend) DeleteCollection(ctx context.Context, tenant, id string) error {
	m, err := n.eval(ctx, unreserveName, []string{n.collIndex(tenant)}, []string{id, ""})
	if err != nil {
		return err
	}
	reply, err := m.ToArray()
	if err != nil || len(reply) != 2 {
		return n.conn.Fail(ctx, fmt.Errorf("unreserveName returned %v: %w", m, err))
	}
	indexed, err1 := reply[0].AsInt64()
	gen, err2 := reply[1].ToString()
	if err := cmp.Or(err1, err2); err != nil {
		return n.conn.Fail(ctx, err)
	}
	k := n.coll(tenant, id)
	keys := []string{k.meta, k.docs, k.chunks}
	if n.feedInScript() {
		keys = append(keys, n.changesKey())
	}
	m, err = n.eval(ctx, dropCollection, keys, []string{tenant, id, strconv.FormatInt(indexed, 10), n.maxLen, gen})
	if err != nil {
		return err
	}
	if m.IsString() {
		return nil
	}
	done, err := m.AsInt64()
	if err != nil {
		return n.conn.Fail(ctx, err)
	}
	if done == 0 {
		return fmt.Errorf("collection %q: %w", id, collection.ErrNotFound)
	}
	return n.publish(ctx, tenant, id, "", collection.OpDeleteCollection)
}

// encodeDocument returns the document as stored, its JSON, the encoded chunks and their vectors' length.
func encodeDocument(doc loom.Document, chunks []collection.Chunk) (loom.Document, string, []byte, int, error) {
	fail := func(err error) (loom.Document, string, []byte, int, error) { return doc, "", nil, 0, err }
	sorted := slices.Clone(chunks)
	slices.SortStableFunc(sorted, func(a, b collection.Chunk) int { return cmp.Compare(a.Index, b.Index) })
	for i := range sorted {
		sorted[i].Metadata = collection.OwnMetadata(doc.Metadata, sorted[i].Metadata) // the document's is in its JSON
	}
	doc.Chunks = len(chunks)
	b, err := json.Marshal(doc)
	if err != nil {
		return fail(fmt.Errorf("valkey: encode document %q: %w", doc.ID, err))
	}
	return doc, string(b), encodeChunks(sorted), store.Dimensions(chunks), nil
}

// PutDocument implements store.CollectionBackend with one script on the collection's slot. The document's
// metadata is stored once, in its JSON; of each chunk's, its own entries alone. It returns
// collection.ErrNotFound if the collection does not exist, store.ErrInvalid for a chunk id another
// document of the collection has or vectors of a length other than the collection's. On a
// cluster, an error with changed true means the document was stored but its change could not be added
// to the feed (see the notes on the change feed in collections.go); DeleteDocument and DeleteCollection
// say so in their errors alike.
func (n *Backend) PutDocument(ctx context.Context, tenant string, doc loom.Document, chunks []collection.Chunk) (bool, error) {
	doc, js, enc, dims, err := encodeDocument(doc, chunks)
	if err != nil {
		return false, err
	}
	k := n.coll(tenant, doc.CollectionID)
	keys := []string{k.meta, k.docs, k.chunks}
	if n.feedInScript() {
		keys = append(keys, n.changesKey())
	}
	m, err := n.eval(ctx, putDocument, keys,
		[]string{doc.ID, doc.Hash, js, string(enc), strconv.Itoa(dims), tenant, doc.CollectionID, n.maxLen})
	if err != nil {
		return false, err
	}
	reply, err := m.ToArray()
	if err != nil || len(reply) == 0 {
		return false, n.conn.Fail(ctx, fmt.Errorf("putDocument returned %v: %w", m, err))
	}
	code, err := reply[0].AsInt64()
	if err != nil {
		return false, n.conn.Fail(ctx, err)
	}
	switch code {
	case -1:
		return false, fmt.Errorf("collection %q: %w", doc.CollectionID, collection.ErrNotFound)
	case -2:
		have := int64(-1)
		if len(reply) > 1 {
			have, _ = reply[1].AsInt64()
		}
		return false, fmt.Errorf("%w: vectors of %d dimensions in collection %q of %d", store.ErrInvalid, dims, doc.CollectionID, have)
	case 0:
		return false, nil
	}
	if len(reply) > 1 { // the script published the change
		return true, nil
	}
	return true, n.publish(ctx, tenant, doc.CollectionID, doc.ID, collection.OpPut)
}

// GetDocument implements store.CollectionBackend: collection.ErrNotFound if the collection or document does
// not exist.
func (n *Backend) GetDocument(ctx context.Context, tenant, collectionID, documentID string) (loom.Document, error) {
	r, err := n.conn.Do(ctx, n.conn.Client.B().Hget().Key(n.coll(tenant, collectionID).docs).Field(documentID).Build())
	if err != nil {
		return loom.Document{}, err
	}
	js, err := r.ToString()
	if valkeygo.IsValkeyNil(err) {
		return loom.Document{}, fmt.Errorf("document %q of collection %q: %w", documentID, collectionID, collection.ErrNotFound)
	}
	if err != nil {
		return loom.Document{}, n.conn.Fail(ctx, err)
	}
	var d loom.Document
	if err := json.Unmarshal([]byte(js), &d); err != nil {
		return loom.Document{}, fmt.Errorf("valkey: decode document %q: %w", documentID, err)
	}
	return d, nil
}

// scan HSCANs a collection's hash (docs or chunks) and calls fn once for each field, after checking that
// the collection exists.
func (n *Backend) scan(ctx context.Context, k collKeys, key, collectionID string, fn func(field, value string) error) error {
	b := n.conn.Client.B()
	rs, err := n.conn.DoMulti(ctx, b.Hexists().Key(k.meta).Field("c").Build(), b.Hscan().Key(key).Cursor(0).Count(scanBatch).Build())
	if err != nil {
		return err
	}
	if ok, err := rs[0].AsBool(); err != nil {
		return n.conn.Fail(ctx, err)
	} else if !ok {
		return fmt.Errorf("collection %q: %w", collectionID, collection.ErrNotFound)
	}
	seen := map[string]struct{}{}
	r := rs[1]
	for {
		e, err := r.AsScanEntry()
		if err != nil {
			return n.conn.Fail(ctx, err)
		}
		for i := 0; i+1 < len(e.Elements); i += 2 {
			if _, dup := seen[e.Elements[i]]; dup { // HSCAN may return a field twice
				continue
			}
			seen[e.Elements[i]] = struct{}{}
			if err := fn(e.Elements[i], e.Elements[i+1]); err != nil {
				return err
			}
		}
		if e.Cursor == 0 {
			return nil
		}
		if r, err = n.conn.Do(ctx, b.Hscan().Key(key).Cursor(e.Cursor).Count(scanBatch).Build()); err != nil {
			return err
		}
	}
}

// ListDocuments implements store.CollectionBackend: collection.ErrNotFound if the collection does not exist.
func (n *Backend) ListDocuments(ctx context.Context, tenant, collectionID string) ([]loom.Document, error) {
	k := n.coll(tenant, collectionID)
	var out []loom.Document
	err := n.scan(ctx, k, k.docs, collectionID, func(id, js string) error {
		var d loom.Document
		if err := json.Unmarshal([]byte(js), &d); err != nil {
			return fmt.Errorf("valkey: decode document %q: %w", id, err)
		}
		out = append(out, d)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b loom.Document) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// DeleteDocument implements store.CollectionBackend: collection.ErrNotFound if there is none.
func (n *Backend) DeleteDocument(ctx context.Context, tenant, collectionID, documentID string) error {
	k := n.coll(tenant, collectionID)
	keys := []string{k.docs, k.chunks}
	if n.feedInScript() {
		keys = append(keys, n.changesKey())
	}
	m, err := n.eval(ctx, deleteDocument, keys, []string{documentID, tenant, collectionID, n.maxLen})
	if err != nil {
		return err
	}
	if m.IsString() {
		return nil
	}
	done, err := m.AsInt64()
	if err != nil {
		return n.conn.Fail(ctx, err)
	}
	if done == 0 {
		return fmt.Errorf("document %q of collection %q: %w", documentID, collectionID, collection.ErrNotFound)
	}
	return n.publish(ctx, tenant, collectionID, documentID, collection.OpDelete)
}

// DocumentChunks implements store.CollectionBackend with one script that reads the document and its chunks:
// collection.ErrNotFound if the collection or document does not exist.
func (n *Backend) DocumentChunks(ctx context.Context, tenant, collectionID, documentID string) ([]collection.Chunk, error) {
	k := n.coll(tenant, collectionID)
	m, err := n.eval(ctx, readChunks, []string{k.docs, k.chunks}, []string{documentID})
	if err != nil {
		return nil, err
	}
	vals, err := m.ToArray()
	if err != nil || len(vals) != 2 {
		return nil, n.conn.Fail(ctx, fmt.Errorf("readChunks returned %v: %w", m, err))
	}
	if vals[1].IsNil() {
		return nil, fmt.Errorf("document %q of collection %q: %w", documentID, collectionID, collection.ErrNotFound)
	}
	v, err := vals[1].ToString()
	if err != nil {
		return nil, n.conn.Fail(ctx, err)
	}
	meta, err := n.documentMetadata(ctx, documentID, vals[0])
	if err != nil {
		return nil, err
	}
	var out []collection.Chunk
	if err := decodeChunks(documentID, v, func(c collection.Chunk) error { out = append(out, withDocument(c, meta)); return nil }); err != nil {
		return nil, fmt.Errorf("%w (document %q)", err, documentID)
	}
	return out, nil
}

// documentMetadata decodes the metadata of a document's JSON (nil for none).
func (n *Backend) documentMetadata(ctx context.Context, id string, js valkeygo.ValkeyMessage) (map[string]string, error) {
	if js.IsNil() {
		return nil, nil // written with its chunks and deleted with them: not seen without them
	}
	s, err := js.ToString()
	if err != nil {
		return nil, n.conn.Fail(ctx, err)
	}
	var d struct {
		Metadata map[string]string `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(s), &d); err != nil {
		return nil, fmt.Errorf("valkey: decode document %q: %w", id, err)
	}
	return d.Metadata, nil
}

// withDocument gives a decoded chunk its metadata as a whole: the document's meta under its own.
func withDocument(c collection.Chunk, meta map[string]string) collection.Chunk {
	c.Metadata, c.DocumentMetadata = collection.MergeMetadata(meta, c.Metadata), meta
	return c
}

// ScanChunks implements store.CollectionBackend: HSCANs of the collection's chunks, about 64 documents a
// reply (a script that reads their documents' metadata with them), each document's chunks passed to fn
// exactly once. It is not a snapshot: a document written during the scan may be seen in its old or new
// version (follow the change feed from before the scan). It returns collection.ErrNotFound if the collection
// does not exist, and fn's error as it is.
func (n *Backend) ScanChunks(ctx context.Context, tenant, collectionID string, fn func(collection.Chunk) error) error {
	k := n.coll(tenant, collectionID)
	seen := map[string]struct{}{}
	for cursor := "0"; ; {
		// Each page one script: a document's chunks and its metadata as of one moment.
		m, err := n.eval(ctx, scanChunks, []string{k.chunks, k.docs, k.meta}, []string{cursor, strconv.Itoa(scanBatch)})
		if err != nil {
			return err
		}
		vals, err := m.ToArray()
		if err != nil || len(vals) == 0 || len(vals)%3 != 1 {
			return n.conn.Fail(ctx, fmt.Errorf("scanChunks returned %v: %w", m, err))
		}
		if vals[0].IsInt64() {
			return fmt.Errorf("collection %q: %w", collectionID, collection.ErrNotFound)
		}
		if cursor, err = vals[0].ToString(); err != nil {
			return n.conn.Fail(ctx, err)
		}
		for i := 1; i+2 < len(vals); i += 3 {
			doc, err1 := vals[i].ToString()
			v, err2 := vals[i+1].ToString()
			if err1 != nil || err2 != nil {
				return n.conn.Fail(ctx, cmp.Or(err1, err2))
			}
			if _, dup := seen[doc]; dup { // HSCAN may return a field twice
				continue
			}
			seen[doc] = struct{}{}
			meta, err := n.documentMetadata(ctx, doc, vals[i+2])
			if err != nil {
				return err
			}
			var fnErr error
			err = decodeChunks(doc, v, func(c collection.Chunk) error {
				fnErr = fn(withDocument(c, meta))
				return fnErr
			})
			if fnErr != nil {
				return fnErr
			}
			if err != nil {
				return fmt.Errorf("%w (document %q)", err, doc)
			}
		}
		if cursor == "0" {
			return nil
		}
	}
}

// validSeq reports whether s is a stream entry id: <ms>-<seq> or <ms>.
func validSeq(s string) bool {
	ms, seq, dash := strings.Cut(s, "-")
	digits := func(s string) bool {
		if s == "" || len(s) > 20 {
			return false
		}
		for i := 0; i < len(s); i++ {
			if s[i] < '0' || s[i] > '9' {
				return false
			}
		}
		return true
	}
	return digits(ms) && (!dash || digits(seq))
}

// Changes implements store.CollectionBackend with XREAD on the change stream (XREAD BLOCK when wait is
// positive, on one of the client's dedicated connections). Seqs are the stream's entry ids; limit is above 0
// and wait not negative (the Store's front sees to both). It returns store.ErrInvalid for an after that is
// not an entry id.
func (n *Backend) Changes(ctx context.Context, after string, limit int, wait time.Duration) ([]collection.Change, error) {
	if after == "" {
		after = "0-0"
	} else if !validSeq(after) {
		return nil, fmt.Errorf("%w: %q is not a change's seq", store.ErrInvalid, after)
	}
	if err := n.conn.Alive(ctx); err != nil {
		return nil, n.conn.Fail(ctx, err)
	}
	key := n.changesKey()
	xread := n.conn.Client.B().Xread().Count(int64(limit))
	var cmd valkeygo.Completed
	timeout := n.conn.Timeout
	if wait > 0 {
		ms := max(wait.Milliseconds(), 1)
		cmd = xread.Block(ms).Streams().Key(key).Id(after).Build()
		timeout += time.Duration(ms) * time.Millisecond
	} else {
		cmd = xread.Streams().Key(key).Id(after).Build()
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// A command built with Block goes to a dedicated connection of valkey-go's blocking pool, so waiting
	// holds up no other call.
	r := n.conn.Client.Do(cctx, cmd)
	streams, err := r.AsXRead()
	if valkeygo.IsValkeyNil(err) {
		return nil, nil
	}
	if err != nil {
		return nil, n.conn.Fail(ctx, err)
	}
	entries := streams[key]
	if len(entries) == 0 {
		return nil, nil
	}
	if after != "0-0" {
		if err := n.checkTrimmed(ctx, after); err != nil {
			return nil, err
		}
	}
	out := make([]collection.Change, len(entries))
	for i, e := range entries {
		out[i] = collection.Change{Seq: e.ID, Tenant: e.FieldValues["tenant"], CollectionID: e.FieldValues["coll"],
			DocumentID: e.FieldValues["doc"], Op: e.FieldValues["op"]}
	}
	return out, nil
}

// checkTrimmed returns collection.ErrFeedTrimmed if the stream may have lost an entry after the one with id
// after. Trimming removes the oldest entries (and leaves max-deleted-entry-id alone), so if the first entry
// the stream holds (XINFO STREAM) is newer than after, after is gone and so may be entries that followed
// it; entries deleted one by one (XDEL, which Loom never sends) show in max-deleted-entry-id. When the
// stream has lost just after itself, this errs on the safe side: the reader rebuilds.
func (n *Backend) checkTrimmed(ctx context.Context, after string) error {
	r, err := n.conn.Do(ctx, n.conn.Client.B().XinfoStream().Key(n.changesKey()).Build())
	if err != nil {
		return err
	}
	info, err := r.AsMap()
	if err != nil {
		return n.conn.Fail(ctx, err)
	}
	gone := func(id string) bool { return validSeq(id) && compareSeq(id, after) > 0 }
	if m, ok := info["first-entry"]; ok {
		if e, err := m.AsXRangeEntry(); err == nil && gone(e.ID) {
			return fmt.Errorf("%w: the oldest change kept is %s, after %s", collection.ErrFeedTrimmed, e.ID, after)
		}
	}
	if m, ok := info["max-deleted-entry-id"]; ok {
		if id, err := m.ToString(); err == nil && gone(id) {
			return fmt.Errorf("%w: change %s was deleted, after %s", collection.ErrFeedTrimmed, id, after)
		}
	}
	return nil
}

// compareSeq compares two valid stream ids as their numbers.
func compareSeq(a, b string) int {
	ams, aseq, _ := strings.Cut(a, "-")
	bms, bseq, _ := strings.Cut(b, "-")
	num := func(s string) uint64 { v, _ := strconv.ParseUint(s, 10, 64); return v }
	if c := cmp.Compare(num(ams), num(bms)); c != 0 {
		return c
	}
	return cmp.Compare(num(aseq), num(bseq))
}

// LastChange implements store.CollectionBackend: the id of the stream's newest entry.
func (n *Backend) LastChange(ctx context.Context) (string, error) {
	r, err := n.conn.Do(ctx, n.conn.Client.B().Xrevrange().Key(n.changesKey()).End("+").Start("-").Count(1).Build())
	if err != nil {
		return "", err
	}
	entries, err := r.AsXRange()
	if err != nil {
		return "", n.conn.Fail(ctx, err)
	}
	if len(entries) == 0 {
		return "", nil
	}
	return entries[0].ID, nil
}
