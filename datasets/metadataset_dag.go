package datasets

import (
	"slices"
	"strings"
)

// The hierarchical kind (ILSVRC): one WordNet DAG per split.

// MDDAG is one split's subgraph of a hierarchical spec: a DAG whose leaves
// are the split's classes. Samplers share its slices: read, never modify.
type MDDAG struct {
	// Nodes are ordered by wn_id, so that every list derived from them is
	// reproducible (the reference sorts nodes and leaves by wn_id in
	// sampling.py, EpisodeDescriptionSampler.__init__, for the same reason).
	Nodes []MDNode
	// Eligible indexes the internal nodes spanning MDMinWays to
	// MDMaxSpanningLeaves leaves, the nodes episodes are drawn from, in
	// wn_id order.
	Eligible []int
	index    map[string]int
}

// MDNode is a node of a split's DAG.
type MDNode struct {
	WNID, Words       string
	Children, Parents []int // indices into MDDAG.Nodes, in wn_id order
	// Leaves are the class ids of the leaves the node spans, in wn_id order
	// (a leaf spans itself).
	Leaves []int
	// Images is the number of images the node spans.
	Images int
	// Class is a leaf's class id, −1 for an internal node.
	Class int
}

// Node finds a node by wn_id, or returns nil.
func (d *MDDAG) Node(wnID string) *MDNode {
	if i, ok := d.index[wnID]; ok {
		return &d.Nodes[i]
	}
	return nil
}

// mdNodeJSON is a node of split_subgraphs, as
// imagenet_specification.py's Synset is serialized.
type mdNodeJSON struct {
	WNID     string   `json:"wn_id"`
	Words    string   `json:"words"`
	Children []string `json:"children_ids"`
	Parents  []string `json:"parents_ids"`
}

// parseHierarchical reads ILSVRC's kind: a DAG per split whose leaves are
// the classes, class_names mapping class ids to the leaves' wn_ids, and
// images_per_class mapping split → wn_id → images spanned.
func (s *MDSpec) parseHierarchical(p *mdParser) error {
	graphs, err := mdGet[map[string][]mdNodeJSON](p, "split_subgraphs", true)
	if err != nil {
		return err
	}
	images, err := mdGet[map[string]map[string]int](p, "images_per_class", true)
	if err != nil {
		return err
	}
	names, err := mdGet[map[string]string](p, "class_names", true)
	if err != nil {
		return err
	}
	// The number of classes of a split is the number of leaves of its DAG
	// (dataset_spec.py, get_classes_per_split).
	var counts [3]int
	for i, key := range mdSplitKeys {
		nodes, ok := graphs[key]
		if !ok {
			return p.errf("split_subgraphs", "split %s missing", key)
		}
		if _, ok := images[key]; !ok {
			return p.errf("images_per_class", "split %s missing", key)
		}
		if s.dags[i], err = buildMDDAG(p, key, nodes); err != nil {
			return err
		}
		for _, nd := range s.dags[i].Nodes {
			if len(nd.Children) == 0 {
				counts[i]++
			}
		}
	}
	n := s.setSplits(counts)
	if s.names, err = mdByID(p, "class_names", names, n, "class", true); err != nil {
		return err
	}
	classOf := make(map[string]int, n)
	for id, wn := range s.names {
		if prev, dup := classOf[wn]; dup {
			return p.errf("class_names", "classes %d and %d are both %s", prev, id, wn)
		}
		classOf[wn] = id
	}
	s.images = make([]int, n)
	for i, key := range mdSplitKeys {
		d, counts := s.dags[i], images[key]
		for j := range d.Nodes {
			nd := &d.Nodes[j]
			if nd.Class = -1; len(nd.Children) > 0 {
				continue
			}
			id, ok := classOf[nd.WNID]
			if !ok {
				return p.errf("class_names", "leaf %s (%s) of split %s has no class id", nd.WNID, nd.Words, key)
			}
			if id < s.first[i] || id >= s.first[i]+s.count[i] {
				return p.errf("class_names", "class %d (%s) is a leaf of split %s, whose class ids are %d to %d", id, nd.WNID, key, s.first[i], s.first[i]+s.count[i]-1)
			}
			c, ok := counts[nd.WNID]
			if !ok || c < 0 {
				return p.errf("images_per_class", "split %s: leaf %s has no count", key, nd.WNID)
			}
			nd.Class, s.images[id] = id, c
		}
		for j := range d.Nodes {
			nd := &d.Nodes[j]
			for k, leaf := range nd.Leaves { // node indices until now
				nd.Leaves[k] = d.Nodes[leaf].Class
				nd.Images += s.images[nd.Leaves[k]]
			}
			// An internal node's count is that of the leaves it spans
			// (dataset_to_records.py, ImageNetConverter).
			if c, ok := counts[nd.WNID]; ok && c != nd.Images {
				return p.errf("images_per_class", "split %s: node %s spans %d images, its count says %d", key, nd.WNID, nd.Images, c)
			}
			if len(nd.Children) > 0 && len(nd.Leaves) >= MDMinWays && len(nd.Leaves) <= MDMaxSpanningLeaves {
				d.Eligible = append(d.Eligible, j)
			}
		}
	}
	return nil
}

// buildMDDAG links a split's nodes, checking that every edge is listed at
// both ends and that there is no cycle, and sets each node's Leaves to the
// indices of the leaves it spans, in wn_id order.
func buildMDDAG(p *mdParser, key string, nodes []mdNodeJSON) (*MDDAG, error) {
	const field = "split_subgraphs"
	nodes = slices.Clone(nodes)
	slices.SortFunc(nodes, func(a, b mdNodeJSON) int { return strings.Compare(a.WNID, b.WNID) })
	d := &MDDAG{Nodes: make([]MDNode, len(nodes)), index: make(map[string]int, len(nodes))}
	for i, n := range nodes {
		if n.WNID == "" {
			return nil, p.errf(field, "split %s: a node has no wn_id", key)
		}
		if _, dup := d.index[n.WNID]; dup {
			return nil, p.errf(field, "split %s: node %s listed twice", key, n.WNID)
		}
		d.index[n.WNID] = i
	}
	refs := func(from string, ids []string, rel string) ([]int, error) {
		out := make([]int, 0, len(ids))
		for _, id := range ids {
			j, ok := d.index[id]
			if !ok {
				return nil, p.errf(field, "split %s: %s of %s is %s, not a node of the split", key, rel, from, id)
			}
			out = append(out, j)
		}
		slices.Sort(out)
		return slices.Compact(out), nil
	}
	for i, n := range nodes {
		nd := &d.Nodes[i]
		nd.WNID, nd.Words = n.WNID, n.Words
		var err error
		if nd.Children, err = refs(n.WNID, n.Children, "a child"); err != nil {
			return nil, err
		}
		if nd.Parents, err = refs(n.WNID, n.Parents, "a parent"); err != nil {
			return nil, err
		}
	}
	for i, nd := range d.Nodes {
		for _, c := range nd.Children {
			if _, found := slices.BinarySearch(d.Nodes[c].Parents, i); !found {
				return nil, p.errf(field, "split %s: %s lists child %s, which does not list it as a parent", key, nd.WNID, d.Nodes[c].WNID)
			}
		}
		for _, q := range nd.Parents {
			if _, found := slices.BinarySearch(d.Nodes[q].Children, i); !found {
				return nil, p.errf(field, "split %s: %s lists parent %s, which does not list it as a child", key, nd.WNID, d.Nodes[q].WNID)
			}
		}
	}
	// Spanned leaves (imagenet_specification.py, get_spanning_leaves), by a
	// depth-first walk that also finds cycles.
	state := make([]uint8, len(d.Nodes)) // 0 new, 1 on the path, 2 done
	var visit func(i int) error
	visit = func(i int) error {
		switch state[i] {
		case 1:
			return p.errf(field, "split %s: a cycle passes through %s", key, d.Nodes[i].WNID)
		case 2:
			return nil
		}
		state[i] = 1
		nd := &d.Nodes[i]
		if len(nd.Children) == 0 {
			nd.Leaves = []int{i}
		}
		for _, c := range nd.Children {
			if err := visit(c); err != nil {
				return err
			}
			nd.Leaves = append(nd.Leaves, d.Nodes[c].Leaves...)
		}
		slices.Sort(nd.Leaves)
		nd.Leaves = slices.Compact(nd.Leaves)
		state[i] = 2
		return nil
	}
	for i := range d.Nodes {
		if err := visit(i); err != nil {
			return nil, err
		}
	}
	return d, nil
}
