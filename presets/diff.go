package presets

import (
	"encoding/json"
	"sort"

	"github.com/mkbench/mkbench/engine"
)

// ConfigDiff lists the fields of b that differ from a, as key=value with
// b's value, sorted by key; nested fields are dotted (conv.filters).
// Fields present in only one of them count as differing ("" when b lacks
// it).
func ConfigDiff(a, b engine.Config) []string {
	fa, fb := flatConfig(a), flatConfig(b)
	var out []string
	for k, v := range fb {
		if fa[k] != v {
			out = append(out, k+"="+v)
		}
	}
	for k := range fa {
		if _, ok := fb[k]; !ok {
			out = append(out, k+"=")
		}
	}
	sort.Strings(out)
	return out
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
