package presets

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// ParseSet parses one "key=value" setting, as `--set` and the sweep files
// write it: key is an override key (see OverrideKeys; "-" may stand for
// "_"), returned in its snake_case form, and the value is parsed by the
// key's kind: an int, a finite number, a word, or a comma-separated list of
// ints (embed_hidden=64,64). Errors name the setting and what it wants; for
// a known key with a bad value, key is returned with the error, and the
// error reads "key=value: want …".
func ParseSet(s string) (key string, v any, err error) {
	k, val, ok := strings.Cut(s, "=")
	k = strings.ReplaceAll(strings.TrimSpace(k), "-", "_")
	if !ok || k == "" {
		return "", nil, fmt.Errorf("%q is not key=value (e.g. lr=0.0005)", s)
	}
	i := slices.IndexFunc(overrides, func(o override) bool { return o.key == k })
	if i < 0 {
		return "", nil, fmt.Errorf("%w %q (settings: %s)", ErrUnknownKey, k, strings.Join(overrideNames(), ", "))
	}
	val = strings.TrimSpace(val)
	switch overrides[i].kind {
	case KindInt:
		n, err := strconv.Atoi(val)
		if err != nil {
			return k, nil, fmt.Errorf("%s=%s: want a whole number", k, val)
		}
		return k, n, nil
	case KindFloat:
		x, err := strconv.ParseFloat(val, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return k, nil, fmt.Errorf("%s=%s: want a number", k, val)
		}
		return k, x, nil
	case KindString:
		if val == "" || strings.ContainsAny(val, " \t,=") {
			return k, nil, fmt.Errorf("%s=%s: want a word", k, val)
		}
		return k, val, nil
	case KindWordList:
		var out []string
		for _, f := range strings.Split(val, ",") {
			f = strings.TrimSpace(f)
			if f == "" || strings.ContainsAny(f, " \t=") {
				return k, nil, fmt.Errorf("%s=%s: want a comma-separated list of names (e.g. %s=aircraft,cu_birds)", k, val, k)
			}
			out = append(out, f)
		}
		return k, out, nil
	case KindIntList:
		var out []int
		for _, f := range strings.Split(val, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				return k, nil, fmt.Errorf("%s=%s: want a comma-separated list of whole numbers (e.g. %s=64,64)", k, val, k)
			}
			out = append(out, n)
		}
		return k, out, nil
	}
	panic("presets: unknown override kind")
}

func overrideNames() []string {
	names := make([]string, len(overrides))
	for j, o := range overrides {
		names[j] = o.key
	}
	return names
}

// Set parses one "key=value" setting with ParseSet and adds it to o, so a
// non-nil Overrides is a flag.Value for a repeatable --set flag. Setting a
// key twice is an error.
func (o Overrides) Set(s string) error {
	k, v, err := ParseSet(s)
	if err != nil {
		return err
	}
	if _, dup := o[k]; dup {
		return fmt.Errorf("%s is set twice", k)
	}
	o[k] = v
	return nil
}

// String writes o as sorted key=value settings, ParseSet's syntax.
func (o Overrides) String() string { return strings.Join(o.Settings(), " ") }

// Settings lists o as sorted key=value settings in ParseSet's syntax, each
// parsing back to its value exactly (a whole number read back from JSON as
// a float is written as a whole number).
func (o Overrides) Settings() []string {
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		v := o[k]
		switch x := v.(type) {
		case []int:
			s := make([]string, len(x))
			for j, n := range x {
				s[j] = strconv.Itoa(n)
			}
			v = strings.Join(s, ",")
		case []any:
			s := make([]string, len(x))
			for j, n := range x {
				s[j] = fmt.Sprint(n)
			}
			v = strings.Join(s, ",")
		case []string:
			v = strings.Join(x, ",")
		case float64:
			if x == math.Trunc(x) && math.Abs(x) < 1e15 {
				v = strconv.FormatFloat(x, 'f', -1, 64)
			} else {
				v = strconv.FormatFloat(x, 'g', -1, 64)
			}
		}
		parts[i] = fmt.Sprintf("%s=%v", k, v)
	}
	return parts
}
