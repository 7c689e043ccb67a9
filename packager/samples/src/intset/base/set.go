// Package intset implements a small unordered set of ints.
package intset

import "sort"

// Set is an unordered set of ints.
type Set map[int]struct{}

// New returns a set holding vs.
func New(vs ...int) Set {
	s := make(Set, len(vs))
	for _, v := range vs {
		s.Add(v)
	}
	return s
}

// Add inserts v into s.
func (s Set) Add(v int) { s[v] = struct{}{} }

// Contains reports whether v is in s.
func (s Set) Contains(v int) bool {
	_, ok := s[v]
	return ok
}

// Union returns a new set with the elements of s or o.
func (s Set) Union(o Set) Set {
	out := New()
	for v := range s {
		out.Add(v)
	}
	for v := range o {
		out.Add(v)
	}
	return out
}

// Intersect returns a new set with the elements in both s and o.
func (s Set) Intersect(o Set) Set {
	out := s
	for v := range out {
		if !o.Contains(v) {
			delete(out, v)
		}
	}
	return out
}

// Sorted returns the elements of s in increasing order.
func (s Set) Sorted() []int {
	out := make([]int, 0, len(s))
	for v := range s {
		out = append(out, v)
	}
	sort.Ints(out)
	return out
}
