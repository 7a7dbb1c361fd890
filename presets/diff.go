package presets

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/mkbench/mkbench/engine"
)

// ConfigDiff lists the fields of b that differ from a, as key=value with
// b's value, sorted by key; nested fields are dotted (conv.filters).
// Fields present in only one of them count as differing. A field b
// leaves out is at its zero value (Config's fields are omitempty), so it
// is written as that zero, of a's value's type (val_every=0,
// train_split=""); one inside an object b lacks altogether (conv.filters
// of a run without a convolutional ψ) has no value and is written empty.
func ConfigDiff(a, b engine.Config) []string {
	fa, fb := flatConfig(a), flatConfig(b)
	var out []string
	for k, v := range fb {
		if fa[k] != v {
			out = append(out, k+"="+v)
		}
	}
	for k, v := range fa {
		if _, ok := fb[k]; !ok {
			out = append(out, k+"="+zeroOf(k, v, fb))
		}
	}
	sort.Strings(out)
	return out
}

// zeroOf is the JSON zero of the type of the value v that field key has
// in one config, for another config whose flattened fields are fb and
// which leaves key out: empty when key's parent object is missing from
// fb too.
func zeroOf(key, v string, fb map[string]string) string {
	if i := strings.LastIndexByte(key, '.'); i >= 0 {
		parent, found := key[:i+1], false
		for k := range fb {
			if strings.HasPrefix(k, parent) {
				found = true
				break
			}
		}
		if !found {
			return ""
		}
	}
	switch {
	case v == "":
		return ""
	case v[0] == '"':
		return `""`
	case v[0] == '[':
		return "[]"
	case v == "true" || v == "false":
		return "false"
	case v[0] == '-' || v[0] >= '0' && v[0] <= '9':
		return "0"
	}
	return ""
}

// flatConfig is c's JSON fields, nested objects flattened with dots and
// each value in its JSON text.
func flatConfig(c engine.Config) map[string]string {
	b, err := json.Marshal(c)
	if err != nil {
		panic(err) // a Config always encodes
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	out := map[string]string{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		if obj, ok := v.(map[string]any); ok {
			for k, x := range obj {
				key := k
				if prefix != "" {
					key = prefix + "." + k
				}
				walk(key, x)
			}
			return
		}
		js, _ := json.Marshal(v)
		out[prefix] = string(js)
	}
	walk("", m)
	return out
}
