package valkeytest

import (
	"strings"
	"testing"
)

func TestStart_AnswersAndRestarts(t *testing.T) {
	t.Parallel()
	s := StartServer(t)
	if _, err := Do(s.Addr, "SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	if got, err := Do(s.Addr, "GET", "k"); err != nil || got[0] != "v" {
		t.Fatalf("GET = %q, %v", got, err)
	}
	s.Stop()
	if _, err := Do(s.Addr, "PING"); err == nil {
		t.Fatal("a stopped server answers")
	}
	s.Stop() // twice is fine
	s.Restart()
	if got, err := Do(s.Addr, "GET", "k"); err != nil || got[0] != "" {
		t.Fatalf("after restart GET = %q, %v (nothing is persisted)", got, err)
	}
}

func TestStartCluster_CoversAllSlots(t *testing.T) {
	t.Parallel()
	c := StartCluster(t, 3)
	for _, addr := range c.Addrs() {
		info, err := Do(addr, "CLUSTER", "INFO")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(info[0], "cluster_slots_assigned:16384") || !strings.Contains(info[0], "cluster_known_nodes:3") {
			t.Fatalf("%s: %s", addr, info[0])
		}
	}
	if _, err := Do(c.Addrs()[0], "SET", "{a}x", "1"); err != nil && !strings.HasPrefix(err.Error(), "MOVED") {
		t.Fatal(err)
	}
}

func TestDo_ErrorReply(t *testing.T) {
	t.Parallel()
	addr := Start(t)
	if _, err := Do(addr, "NOSUCHCOMMAND"); err == nil {
		t.Fatal("an unknown command succeeded")
	}
}

func TestStartSentinel_NamesTheMaster(t *testing.T) {
	t.Parallel()
	master := Start(t)
	s := StartSentinel(t, master)
	r, err := Do(s.Addr, "SENTINEL", "MASTER", SentinelMaster)
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{}
	for i := 0; i+1 < len(r); i += 2 {
		fields[r[i]] = r[i+1]
	}
	if fields["ip"]+":"+fields["port"] != master || fields["quorum"] != "1" {
		t.Fatalf("SENTINEL MASTER %s = %v", SentinelMaster, fields)
	}
	if got, err := Do(s.Addr, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", "nosuchmaster"); err != nil || len(got) != 0 {
		t.Fatalf("an unknown master set: %q, %v", got, err)
	}
}

func TestStartServer_WithPassword(t *testing.T) {
	t.Parallel()
	s := StartServer(t, "--requirepass", "pw")
	if _, err := Do(s.Addr, "GET", "k"); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
		t.Fatalf("GET without AUTH: %v", err)
	}
}
