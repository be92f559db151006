package tokenizer

import (
	"encoding/binary"
	"math/bits"
	"unsafe"
)

// rankTable maps token bytes to their rank (id). It replaces a map[string]uint32 on the hot path of the merge
// loop: a key of up to 16 bytes is held in the entry itself (two overlapping little-endian words and the
// length), so a lookup hashes two words and compares them, with no pointer chasing; longer keys are
// checked against the vocabulary's bytes. Open addressing with linear probing at a load factor <= 1/2.
//
// The shortest keys, which the merge loop looks up most, have tables of their own: a direct array for two
// bytes and a table of packed words for three and four, small enough to stay in the CPU's caches.
type rankTable struct {
	entries []rankEntry
	shift   uint8 // 64 - log2(len(entries))
	blob    string
	offs    []uint32

	one        [256]uint32
	two        []uint32 // indexed by the two bytes, little-endian
	short      []uint64 // keys of 3 and 4 bytes: key | len<<32 | (id+1)<<35; 0 marks an empty slot
	shortShift uint8
}

type rankEntry struct {
	a, b uint64
	n    uint32 // key length; 0 marks an empty slot
	id   uint32
}

func newRankTable(blob string, offs []uint32) *rankTable {
	count := len(offs) - 1
	size := 1
	for size < 2*count {
		size <<= 1
	}
	t := &rankTable{
		entries: make([]rankEntry, size),
		shift:   uint8(64 - bits.TrailingZeros(uint(size))),
		blob:    blob,
		offs:    offs,
	}
	mask := uint64(size - 1)
	shortCount := 0
	for id := range count {
		if n := offs[id+1] - offs[id]; n == 3 || n == 4 {
			shortCount++
		}
	}
	shortSize := 1
	for shortSize < 2*shortCount {
		shortSize <<= 1
	}
	t.short = make([]uint64, shortSize)
	t.shortShift = uint8(64 - bits.TrailingZeros(uint(shortSize)))
	t.two = make([]uint32, 1<<16)
	for i := range t.one {
		t.one[i] = noRank
	}
	for i := range t.two {
		t.two[i] = noRank
	}
	for id := range count {
		key := blob[offs[id]:offs[id+1]]
		switch len(key) {
		case 1:
			t.one[key[0]] = uint32(id)
		case 2:
			t.two[uint16(key[0])|uint16(key[1])<<8] = uint32(id)
		case 3, 4:
			k := shortKey(key)
			i := shortSlot(k, t.shortShift)
			for t.short[i] != 0 {
				i = (i + 1) & uint64(shortSize-1)
			}
			t.short[i] = k | uint64(id+1)<<35
		}
		a, b := packKey(key)
		n := uint32(len(key))
		i := t.slot(a, b, n)
		for t.entries[i].n != 0 {
			i = (i + 1) & mask
		}
		t.entries[i] = rankEntry{a: a, b: b, n: n, id: uint32(id)}
	}
	return t
}

// packKey packs s (non-empty) into two words such that, for keys of one length up to 16 bytes, equal words
// mean equal keys.
func packKey(s string) (a, b uint64) {
	n := len(s)
	p := unsafe.Slice(unsafe.StringData(s), n)
	switch {
	case n >= 8:
		return binary.LittleEndian.Uint64(p), binary.LittleEndian.Uint64(p[n-8:])
	case n >= 4:
		return uint64(binary.LittleEndian.Uint32(p)) | uint64(binary.LittleEndian.Uint32(p[n-4:]))<<32, 0
	default:
		return uint64(p[0]) | uint64(p[n/2])<<8 | uint64(p[n-1])<<16, 0
	}
}

// packKey32 packs s (1 to 32 bytes) into four words such that, for keys of one length, equal words mean
// equal keys.
func packKey32(s string) (k [4]uint64) {
	n := len(s)
	if n <= 16 {
		k[0], k[1] = packKey(s)
		return k
	}
	p := unsafe.Slice(unsafe.StringData(s), n)
	k[0] = binary.LittleEndian.Uint64(p)
	k[1] = binary.LittleEndian.Uint64(p[8:])
	k[2] = binary.LittleEndian.Uint64(p[n-16:])
	k[3] = binary.LittleEndian.Uint64(p[n-8:])
	return k
}

func (t *rankTable) slot(a, b uint64, n uint32) uint64 {
	return slot(a, b, n) >> t.shift
}

// slot hashes a packed key to 64 bits; callers keep the high bits.
func slot(a, b uint64, n uint32) uint64 {
	h := (a ^ uint64(n)<<59) * 0x9E3779B97F4A7C15
	h ^= b * 0xC2B2AE3D27D4EB4F
	h ^= h >> 29
	return h * 0x165667B19E3779F9
}

// shortKey packs a key of 3 or 4 bytes with its length.
func shortKey(s string) uint64 {
	k := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16
	if len(s) == 4 {
		k |= uint64(s[3]) << 24
	}
	return k | uint64(len(s))<<32
}

func shortSlot(k uint64, shift uint8) uint64 {
	return (k * 0x9E3779B97F4A7C15) >> shift
}

// get returns the rank of token bytes s (non-empty), or noRank.
func (t *rankTable) get(s string) uint32 {
	switch len(s) {
	case 1:
		return t.one[s[0]]
	case 2:
		return t.two[uint16(s[0])|uint16(s[1])<<8]
	case 3, 4:
		k := shortKey(s)
		mask := uint64(len(t.short) - 1)
		for i := shortSlot(k, t.shortShift); ; i = (i + 1) & mask {
			e := t.short[i]
			if e == 0 {
				return noRank
			}
			if e&(1<<35-1) == k {
				return uint32(e>>35) - 1
			}
		}
	}
	a, b := packKey(s)
	n := uint32(len(s))
	mask := uint64(len(t.entries) - 1)
	for i := t.slot(a, b, n); ; i = (i + 1) & mask {
		e := &t.entries[i]
		if e.n == 0 {
			return noRank
		}
		if e.a == a && e.b == b && e.n == n && (n <= 16 || t.blob[t.offs[e.id]:t.offs[e.id+1]] == s) {
			return e.id
		}
	}
}
