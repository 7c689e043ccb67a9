package intset

import (
	"reflect"
	"testing"
)

func TestSet(t *testing.T) {
	s := New(1, 2, 3)
	cases := []struct {
		name string
		v    int
		want bool
	}{
		{"contains present", 2, true},
		{"contains missing", 7, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := s.Contains(c.v); got != c.want {
				t.Errorf("Contains(%d) = %v, want %v", c.v, got, c.want)
			}
		})
	}
}

func TestUnion(t *testing.T) {
	got := New(1, 2).Union(New(2, 3)).Sorted()
	if want := []int{1, 2, 3}; !reflect.DeepEqual(got, want) {
		t.Errorf("Union = %v, want %v", got, want)
	}
}

func TestSorted(t *testing.T) {
	got := New(3, 1, 2).Sorted()
	if want := []int{1, 2, 3}; !reflect.DeepEqual(got, want) {
		t.Errorf("Sorted = %v, want %v", got, want)
	}
}
