package engine_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/store"
)

// TestNotFound_NamesTheTenant: the tenant comes from the context alone (loom.WithTenant), and an id that
// exists under another tenant is not found with an error that says which tenant looked, so that a caller
// who set the wrong tenant sees why.
func TestNotFound_NamesTheTenant(t *testing.T) {
	t.Parallel()
	st := newMemory()
	acme := loom.WithTenant(t.Context(), "acme")
	globex := loom.WithTenant(t.Context(), "globex")
	if err := st.PutAgent(acme, "acme", store.Agent{ID: "helper", Instructions: "Help."}); err != nil {
		t.Fatal(err)
	}
	eng, c := newCollectionsEngine(t, st)
	if _, err := eng.Assemble(acme, engine.Request{Agent: "helper", Request: assembler.Request{Message: "hi"}}); err != nil {
		t.Fatalf("acme's own agent: %v", err)
	}
	checks := map[string]error{}
	_, checks["agent"] = eng.Assemble(globex, engine.Request{Agent: "helper", Request: assembler.Request{Message: "hi"}})
	_, checks["collection"] = eng.Collection(globex, c.ID)
	_, checks["retrieve"] = eng.Retrieve(globex, "password", engine.WithCollection(c.ID))
	_, checks["store agent"] = st.GetAgent(globex, "globex", "helper")
	checks["delete session"] = st.DeleteSession(globex, "globex", "none")
	for what, err := range checks {
		if !errors.Is(err, loom.ErrNotFound) || !strings.Contains(err.Error(), `tenant "globex"`) {
			t.Errorf("%s under globex: %v, want not found naming tenant \"globex\"", what, err)
		}
	}
}
