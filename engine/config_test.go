package engine

import (
	"math"
	"strings"
	"testing"
)

// A 1-way task has one class, so every prediction would be right: invalid.
func TestConfigWayOneIsInvalid(t *testing.T) {
	c := sineConfig("rbf")
	c.Way = 1
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "way must be at least 2") {
		t.Fatalf("way 1: %v", err)
	}
	c.Way = 2
	if err := c.Validate(); err != nil {
		t.Fatalf("way 2: %v", err)
	}
}

// The estimate grows with every size, does not overflow, and sees the
// issue's bases=100000000 as far beyond any machine.
func TestMemoryEstimate(t *testing.T) {
	c := sineConfig("metakernel")
	base := c.MemoryEstimate(1, 1)
	if base < 50<<20 || base > 1<<30 {
		t.Fatalf("sine estimate %d bytes", base)
	}
	for name, grow := range map[string]func(c *Config){
		"bases":      func(c *Config) { c.Bases *= 4 },
		"meta_batch": func(c *Config) { c.MetaBatch *= 4 },
		"shot":       func(c *Config) { c.Shot *= 4 },
		"query":      func(c *Config) { c.Query *= 4 },
		"eval_query": func(c *Config) { c.EvalQuery *= 4 },
	} {
		g := c
		grow(&g)
		if g.MemoryEstimate(1, 1) <= base {
			t.Errorf("%s ×4 does not grow the estimate", name)
		}
	}
	big := c
	big.Bases = 100000000
	if e := big.MemoryEstimate(1, 1); e < 1<<40 {
		t.Errorf("bases=1e8: %d bytes", e)
	}
	big.Bases, big.MetaBatch = math.MaxInt/2, math.MaxInt/2
	if e := big.MemoryEstimate(1, 1); e != math.MaxUint64 {
		t.Errorf("huge sizes: %d, want saturation", e)
	}
	if e := c.EvalMemoryEstimate(1, 1); e >= base {
		t.Errorf("evaluation %d ≥ training %d", e, base)
	}
}
