package datasets

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// pickleDict parses a pickle whose value must be a dict, as both CIFAR-100
// and LEO write them.
func pickleDict(label string, data []byte) (*pyDict, error) {
	v, err := parsePickle(data)
	if err != nil {
		return nil, fmt.Errorf("datasets: %s: %w", label, err)
	}
	d, ok := v.(*pyDict)
	if !ok {
		return nil, fmt.Errorf("datasets: %s holds a pickled %s, want a dict", label, pyTypeName(v))
	}
	return d, nil
}

// dictArray returns d[key] as an array; lists of ints are accepted as 1-D
// int64 arrays (CIFAR-100 stores its labels as lists).
func dictArray(label string, d *pyDict, key string) (*npArray, error) {
	v, ok := d.get(key)
	if !ok {
		return nil, fmt.Errorf("datasets: %s has no %q entry (it has %s)", label, key, strings.Join(d.keyNames(), ", "))
	}
	switch a := v.(type) {
	case *npArray:
		if a.shape == nil {
			return nil, fmt.Errorf("datasets: %s: %q is an array that was never filled", label, key)
		}
		return a, nil
	case *pyList:
		out := &npArray{kind: 'i', size: 8, shape: []int{len(a.items)}, data: make([]byte, 8*len(a.items))}
		allText := len(a.items) > 0
		for _, it := range a.items {
			if _, ok := pyText(it); !ok {
				allText = false
			}
		}
		if allText {
			return &npArray{kind: 'O', size: 8, shape: []int{len(a.items)}, objects: a.items}, nil
		}
		for i, it := range a.items {
			n, ok := it.(int64)
			if !ok {
				return nil, fmt.Errorf("datasets: %s: %q[%d] is a %s, want an int", label, key, i, pyTypeName(it))
			}
			binary.LittleEndian.PutUint64(out.data[8*i:], uint64(n))
		}
		return out, nil
	}
	return nil, fmt.Errorf("datasets: %s: %q is a %s, want an array or a list", label, key, pyTypeName(v))
}
