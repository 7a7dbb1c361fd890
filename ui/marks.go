package ui

// marks are the rows of a table marked to compare (the sweep's units, the
// runs screen's runs), each with the colour slot its curve is drawn in.
type marks[K comparable] map[K]int

// toggle marks k with the lowest colour slot free, or unmarks it.
func (m marks[K]) toggle(k K) {
	if _, ok := m[k]; ok {
		delete(m, k)
		return
	}
	used := map[int]bool{}
	for _, c := range m {
		used[c] = true
	}
	c := 0
	for used[c] {
		c++
	}
	m[k] = c
}
