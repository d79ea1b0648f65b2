package chain

import (
	"reflect"
	"testing"
)

// Every field of a chain's config is some reload section's, so a new
// section cannot be forgotten by reloads.
func TestSectionsCoverConfig(t *testing.T) {
	covered := map[string]bool{}
	for _, s := range sections {
		for _, f := range s.fields {
			if _, ok := reflect.TypeFor[Config]().FieldByName(f); !ok {
				t.Errorf("section %q names no field %s", s.name, f)
			}
			covered[f] = true
		}
	}
	for f := range reflect.TypeFor[Config]().Fields() {
		if !covered[f.Name] {
			t.Errorf("Config.%s is in no sections entry: say how a reload applies it", f.Name)
		}
	}
}
