package runstate

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestParseReadsOldWords(t *testing.T) {
	for word, want := range map[string]State{
		"finished": Finished, "done": Finished,
		"stopped": Stopped, "interrupted": Stopped, "cancelled": Stopped,
		"running": Running, "failed": Failed, "pending": Pending, "evaluating": Evaluating,
	} {
		if got, err := Parse(word); got != want || err != nil {
			t.Errorf("Parse(%q) = %q, %v; want %q", word, got, err, want)
		}
	}
	for _, bad := range []string{"", "Finished", "halted", "done "} {
		if s, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) = %q, want an error", bad, s)
		}
	}
}

// A file written with an old word reads as today's state.
func TestUnmarshalOldFile(t *testing.T) {
	var v struct {
		States []State `json:"states"`
	}
	if err := json.Unmarshal([]byte(`{"states":["done","interrupted","running"]}`), &v); err != nil {
		t.Fatal(err)
	}
	if want := []State{Finished, Stopped, Running}; !slices.Equal(v.States, want) {
		t.Errorf("read %v, want %v", v.States, want)
	}
	if err := json.Unmarshal([]byte(`{"states":["sideways"]}`), &v); err == nil {
		t.Error("an unknown state read without an error")
	}
	b, _ := json.Marshal(struct{ S State }{Stopped})
	if string(b) != `{"S":"stopped"}` {
		t.Errorf("written as %s", b)
	}
}

func TestWordsAndActive(t *testing.T) {
	if w := State(Stopped).Words(); !slices.Equal(w, []string{"stopped", "cancelled", "interrupted"}) {
		t.Errorf("stopped's words: %v", w)
	}
	if w := State(Running).Words(); !slices.Equal(w, []string{"running"}) {
		t.Errorf("running's words: %v", w)
	}
	for _, s := range All {
		want := s == Starting || s == Running || s == Paused || s == Stopping || s == Evaluating
		if s.Active() != want {
			t.Errorf("%s.Active() = %v", s, !want)
		}
	}
}
