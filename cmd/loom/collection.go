package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/store"
)

const collectionUsage = `Usage:

	loom collection list
	loom collection show --collection NAME
	loom collection delete --collection NAME
	loom collection weights --collection NAME [--keyword-weight W] [--vector-weight W]

list prints the tenant's collections as JSON Lines, ordered by name, as GET /v1/collections lists them;
show prints one collection (by name or id) as JSON, with how many documents, chunks and bytes of text it
holds ("documents", "chunks", "bytes"); delete deletes a collection with all its documents and chunks.
weights sets the weights of the keyword and vector rankings that hybrid and mmr retrieval fuse (see loom
help retrieve), the settings a collection may change after it is made, and prints the collection: a
weight not given is left as it is, "default" puts it back to its default (1 for the keywords, the
embedder's own for the vectors); weights are finite, not negative, and not both 0. Collections are made by
loom ingest. Each takes --store, --layout and --tenant.

Exit status: 0 on success; 1 if the collection does not exist or the store cannot be read; 2 for bad
usage, or a store that keeps no collections (the cookbook layout).
` + storeFlagsUsage

const documentUsage = `Usage:

	loom document list --collection NAME
	loom document delete --collection NAME --document ID

list prints the collection's documents as JSON Lines, ordered by id (a document's id is its path as loom
ingest walked it): id, source, content type, hash, bytes of text, chunks, metadata and when it was
stored; delete deletes one document and its chunks (loom ingest --prune deletes those whose files are
gone). Each takes --store, --layout and --tenant.

Exit status: 0 on success; 1 if the collection or document does not exist or the store cannot be read; 2
for bad usage, or a store that keeps no collections (the cookbook layout).
` + storeFlagsUsage

var collectionVerbs = map[string]verb{"list": collectionList, "show": collectionShow, "delete": collectionDelete, "weights": collectionWeights}

func runCollection(ctx context.Context, args []string, s streams) error {
	return verbs(ctx, "collection", collectionUsage, collectionVerbs, args, s)
}

var documentVerbs = map[string]verb{"list": documentList, "delete": documentDelete}

func runDocument(ctx context.Context, args []string, s streams) error {
	return verbs(ctx, "document", documentUsage, documentVerbs, args, s)
}

// withEngine opens an engine over the store the flags name, for the flags' tenant, runs fn and closes it;
// fn's error is the verb's: a usage error (exit 2) for bad input or a store without collections.
func (sf storeFlags) withEngine(ctx context.Context, verb string, fn func(context.Context, *engine.Engine) error) error {
	eng, closeAll, err := openEngine(ctx, sf)
	if err != nil {
		return err
	}
	defer closeAll()
	err = fn(loom.WithTenant(ctx, *sf.tenant), eng)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, engine.ErrNoCollections), errors.Is(err, engine.ErrInvalidRequest):
		return usageError(fmt.Errorf("%s: %w", verb, err))
	}
	return storeError(verb, err)
}

func collectionList(ctx context.Context, name string, args []string, s streams) error {
	fs, help := newFlagSet(name, collectionUsage, s)
	sf := addStoreFlags(fs)
	if err := parseFlags(fs, help, args); err != nil {
		return err
	}
	if err := required(fs); err != nil {
		return err
	}
	return sf.withEngine(ctx, name, func(ctx context.Context, eng *engine.Engine) error {
		cs, err := eng.Collections(ctx)
		if err != nil {
			return err
		}
		for _, c := range cs {
			if err := writeJSON(s.stdout, c); err != nil {
				return err
			}
		}
		return nil
	})
}

// collectionStats is what loom collection show prints: the collection and what it holds.
type collectionStats struct {
	loom.Collection
	Documents int `json:"documents"`
	Chunks    int `json:"chunks"`
	Bytes     int `json:"bytes"`
}

func collectionShow(ctx context.Context, name string, args []string, s streams) error {
	fs, help := newFlagSet(name, collectionUsage, s)
	sf := addStoreFlags(fs)
	coll := fs.String("collection", "", "the collection's `name` (or id)")
	if err := parseFlags(fs, help, args); err != nil {
		return err
	}
	if err := required(fs, "collection"); err != nil {
		return err
	}
	return sf.withEngine(ctx, name, func(ctx context.Context, eng *engine.Engine) error {
		c, err := eng.Collection(ctx, *coll)
		if err != nil {
			return err
		}
		docs, err := eng.Documents(ctx, c.ID)
		if err != nil {
			return err
		}
		out := collectionStats{Collection: c, Documents: len(docs)}
		for _, d := range docs {
			out.Chunks += d.Chunks
			out.Bytes += d.Bytes
		}
		return writeJSON(s.stdout, out)
	})
}

func collectionDelete(ctx context.Context, name string, args []string, s streams) error {
	fs, help := newFlagSet(name, collectionUsage, s)
	sf := addStoreFlags(fs)
	coll := fs.String("collection", "", "the collection's `name` (or id)")
	if err := parseFlags(fs, help, args); err != nil {
		return err
	}
	if err := required(fs, "collection"); err != nil {
		return err
	}
	return sf.withEngine(ctx, name, func(ctx context.Context, eng *engine.Engine) error {
		return eng.DeleteCollection(ctx, *coll)
	})
}

func documentList(ctx context.Context, name string, args []string, s streams) error {
	fs, help := newFlagSet(name, documentUsage, s)
	sf := addStoreFlags(fs)
	coll := fs.String("collection", "", "the collection's `name` (or id)")
	if err := parseFlags(fs, help, args); err != nil {
		return err
	}
	if err := required(fs, "collection"); err != nil {
		return err
	}
	return sf.withEngine(ctx, name, func(ctx context.Context, eng *engine.Engine) error {
		docs, err := eng.Documents(ctx, *coll)
		if err != nil {
			return err
		}
		for _, d := range docs {
			if err := writeJSON(s.stdout, d); err != nil {
				return err
			}
		}
		return nil
	})
}

func documentDelete(ctx context.Context, name string, args []string, s streams) error {
	fs, help := newFlagSet(name, documentUsage, s)
	sf := addStoreFlags(fs)
	coll := fs.String("collection", "", "the collection's `name` (or id)")
	doc := fs.String("document", "", "the document's `id` (as loom document list prints it)")
	if err := parseFlags(fs, help, args); err != nil {
		return err
	}
	if err := required(fs, "collection", "document"); err != nil {
		return err
	}
	return sf.withEngine(ctx, name, func(ctx context.Context, eng *engine.Engine) error {
		err := eng.DeleteDocument(ctx, *coll, *doc)
		if errors.Is(err, collection.ErrNotFound) || errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("collection %q has no document %q: %w", *coll, *doc, err)
		}
		return err
	})
}

func collectionWeights(ctx context.Context, name string, args []string, s streams) error {
	fs, help := newFlagSet(name, collectionUsage, s)
	sf := addStoreFlags(fs)
	coll := fs.String("collection", "", "the collection's `name` (or id)")
	kwFlag := fs.String("keyword-weight", "", "the keyword ranking's weight `W`, or \"default\"")
	vecFlag := fs.String("vector-weight", "", "the vector ranking's weight `W`, or \"default\"")
	if err := parseFlags(fs, help, args); err != nil {
		return err
	}
	if err := required(fs, "collection"); err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	// parse reads a weight flag: a number, or "default" for nil.
	parse := func(flagName, v string) (*float64, error) {
		if v == "default" {
			return nil, nil
		}
		w, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, usageError(fmt.Errorf("%s: --%s %q: want a number or \"default\"", name, flagName, v))
		}
		return &w, nil
	}
	return sf.withEngine(ctx, name, func(ctx context.Context, eng *engine.Engine) error {
		c, err := eng.Collection(ctx, *coll)
		if err != nil {
			return err
		}
		kw, vec := c.KeywordWeight, c.VectorWeight
		if given["keyword-weight"] {
			if kw, err = parse("keyword-weight", *kwFlag); err != nil {
				return err
			}
		}
		if given["vector-weight"] {
			if vec, err = parse("vector-weight", *vecFlag); err != nil {
				return err
			}
		}
		c, err = eng.SetFusionWeights(ctx, c.ID, kw, vec)
		if err != nil {
			return err
		}
		return writeJSON(s.stdout, c)
	})
}
