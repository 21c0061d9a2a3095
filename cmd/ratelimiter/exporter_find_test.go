package main

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
)

// The heap keeps the n least names offered, in any order of offer, and
// says when one was left out; a name offered twice is kept once.
func TestNameHeapKeepsLeastNames(t *testing.T) {
	var names []string
	for i := 0; i < 500; i++ {
		names = append(names, fmt.Sprintf("lim-%03d", i))
	}
	for _, n := range []int{1, 7, 500, 600} {
		k := newNameHeap(n)
		left := false
		for _, i := range rand.Perm(len(names)) {
			if !k.offer(found{name: names[i]}) {
				left = true
			}
			k.offer(found{name: names[i]}) // again: no change
		}
		got := k.sorted()
		want := names[:min(n, len(names))]
		if len(got) != len(want) {
			t.Fatalf("n=%d: kept %d, want %d", n, len(got), len(want))
		}
		for i := range want {
			if got[i].name != want[i] {
				t.Fatalf("n=%d: kept %v..., want %v...", n, got[i].name, want[i])
			}
		}
		if left != (n < len(names)) {
			t.Errorf("n=%d: left out reported %v", n, left)
		}
		if !sort.SliceIsSorted(got, func(i, j int) bool { return got[i].name < got[j].name }) {
			t.Errorf("n=%d: not in name order", n)
		}
	}
}
