// Reference for kube-sim's server-side apply: plays the cases in ssa-cases.json through
// sigs.k8s.io/structured-merge-diff (merge.Updater, the library the API server applies with)
// and prints, per step, the object and each manager's FieldsV1, or the conflicts.
//
// Usage: go run . < ../ssa-cases.json > ../ssa-expected.json   (see regen.sh)
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/ioutil"
	"os"
	"sort"
	"strings"

	"sigs.k8s.io/structured-merge-diff/v4/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v4/merge"
	"sigs.k8s.io/structured-merge-diff/v4/typed"
)

type step struct {
	Op      string          `json:"op"` // "apply" or "update" (a JSON merge patch by an Update manager)
	Manager string          `json:"manager"`
	Force   bool            `json:"force,omitempty"`
	Object  json.RawMessage `json:"object,omitempty"`
	Patch   json.RawMessage `json:"patch,omitempty"`
}

type testCase struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"` // the schema type: Deployment, ConfigMap, CustomResourceDefinition
	Steps []step `json:"steps"`
}

type conflict struct {
	Manager string `json:"manager"`
	Field   string `json:"field"`
}

type result struct {
	Object    interface{}                `json:"object,omitempty"`
	Managed   map[string]json.RawMessage `json:"managed,omitempty"`
	Conflicts []conflict                 `json:"conflicts,omitempty"`
	Error     string                     `json:"error,omitempty"`
}

type caseResult struct {
	Name  string   `json:"name"`
	Steps []result `json:"steps"`
}

// One API version, so conversion is the identity.
type identity struct{}

func (identity) Convert(v *typed.TypedValue, _ fieldpath.APIVersion) (*typed.TypedValue, error) {
	return v, nil
}
func (identity) IsMissingVersionError(error) bool { return false }

const version = fieldpath.APIVersion("v1")

// The fields the API server never tracks (its stripMeta field manager).
var stripped = fieldpath.NewSet(
	fieldpath.MakePathOrDie("apiVersion"),
	fieldpath.MakePathOrDie("kind"),
	fieldpath.MakePathOrDie("metadata"),
	fieldpath.MakePathOrDie("metadata", "name"),
	fieldpath.MakePathOrDie("metadata", "namespace"),
	fieldpath.MakePathOrDie("metadata", "creationTimestamp"),
	fieldpath.MakePathOrDie("metadata", "selfLink"),
	fieldpath.MakePathOrDie("metadata", "uid"),
	fieldpath.MakePathOrDie("metadata", "generation"),
	fieldpath.MakePathOrDie("metadata", "managedFields"),
	fieldpath.MakePathOrDie("metadata", "resourceVersion"),
)

// decode reads JSON keeping integers as int64 and other numbers as float64, as the API
// server's decoder does (so 32 and 32.0 reach the library as an int and a float).
func decode(raw []byte) (interface{}, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v interface{}
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return numbers(v), nil
}

func numbers(v interface{}) interface{} {
	switch t := v.(type) {
	case map[string]interface{}:
		for k, x := range t {
			t[k] = numbers(x)
		}
	case []interface{}:
		for i, x := range t {
			t[i] = numbers(x)
		}
	case json.Number:
		if !strings.ContainsAny(string(t), ".eE") {
			if i, err := t.Int64(); err == nil {
				return i
			}
		}
		f, _ := t.Float64()
		return f
	}
	return v
}

// mergePatch is RFC 7386 JSON merge patch.
func mergePatch(doc, patch interface{}) interface{} {
	p, ok := patch.(map[string]interface{})
	if !ok {
		return patch
	}
	d, ok := doc.(map[string]interface{})
	if !ok {
		d = map[string]interface{}{}
	}
	out := map[string]interface{}{}
	for k, v := range d {
		out[k] = v
	}
	for k, v := range p {
		if v == nil {
			delete(out, k)
		} else {
			out[k] = mergePatch(out[k], v)
		}
	}
	return out
}

// dropNulls removes null map values and empties them out, as the typed objects the API
// server stores do (RemoveItems leaves an emptied map or list as null).
func dropNulls(v interface{}) interface{} {
	switch t := v.(type) {
	case map[string]interface{}:
		for k, x := range t {
			if x == nil {
				delete(t, k)
				continue
			}
			t[k] = dropNulls(x)
		}
	case []interface{}:
		for i, x := range t {
			t[i] = dropNulls(x)
		}
	}
	return v
}

func managerKey(name, op string) string { return name + "/" + op }

func strip(managers fieldpath.ManagedFields) fieldpath.ManagedFields {
	for m, vs := range managers {
		s := vs.Set().Difference(stripped)
		if s.Empty() {
			delete(managers, m)
			continue
		}
		managers[m] = fieldpath.NewVersionedSet(s, vs.APIVersion(), vs.Applied())
	}
	return managers
}

func run(parser *typed.Parser, c testCase) caseResult {
	out := caseResult{Name: c.Name}
	tp := parser.Type(c.Kind)
	var live interface{} = map[string]interface{}{}
	managers := fieldpath.ManagedFields{}
	updater := merge.Updater{Converter: identity{}}
	for _, s := range c.Steps {
		r, newLive, newManagers := playStep(tp, &updater, s, live, managers)
		if r.Error == "" && r.Conflicts == nil {
			live, managers = newLive, newManagers
			r.Object = live
			r.Managed = map[string]json.RawMessage{}
			for m, vs := range managers {
				b, err := vs.Set().ToJSON()
				if err != nil {
					r.Error = err.Error()
				}
				r.Managed[m] = b
			}
		}
		out.Steps = append(out.Steps, r)
	}
	return out
}

func playStep(tp typed.ParseableType, u *merge.Updater, s step, live interface{}, managers fieldpath.ManagedFields) (result, interface{}, fieldpath.ManagedFields) {
	fail := func(err error) (result, interface{}, fieldpath.ManagedFields) {
		return result{Error: err.Error()}, nil, nil
	}
	liveTV, err := tp.FromUnstructured(live)
	if err != nil {
		return fail(fmt.Errorf("live: %v", err))
	}
	var newTV *typed.TypedValue
	var got fieldpath.ManagedFields
	switch s.Op {
	case "apply":
		cfg, err := decode(s.Object)
		if err != nil {
			return fail(err)
		}
		cfgTV, err := tp.FromUnstructured(cfg)
		if err != nil {
			return fail(fmt.Errorf("config: %v", err))
		}
		newTV, got, err = u.Apply(liveTV, cfgTV, version, managers.Copy(), managerKey(s.Manager, "Apply"), s.Force)
		if cs, ok := err.(merge.Conflicts); ok {
			return result{Conflicts: conflictsOf(cs)}, nil, nil
		}
		if err != nil {
			return fail(err)
		}
		if newTV == nil { // unchanged
			newTV = liveTV
		}
	case "update":
		patch, err := decode(s.Patch)
		if err != nil {
			return fail(err)
		}
		next := mergePatch(deepCopy(live), patch)
		newTV, err = tp.FromUnstructured(next)
		if err != nil {
			return fail(fmt.Errorf("updated: %v", err))
		}
		newTV, got, err = u.Update(liveTV, newTV, version, managers.Copy(), managerKey(s.Manager, "Update"))
		if err != nil {
			return fail(err)
		}
	default:
		return fail(fmt.Errorf("unknown op %q", s.Op))
	}
	obj := dropNulls(deepCopy(newTV.AsValue().Unstructured()))
	return result{}, obj, strip(got)
}

func conflictsOf(cs merge.Conflicts) []conflict {
	out := []conflict{}
	for _, c := range cs {
		out = append(out, conflict{Manager: c.Manager, Field: c.Path.String()})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Manager != out[j].Manager {
			return out[i].Manager < out[j].Manager
		}
		return out[i].Field < out[j].Field
	})
	return out
}

func deepCopy(v interface{}) interface{} {
	switch t := v.(type) {
	case map[string]interface{}:
		m := make(map[string]interface{}, len(t))
		for k, x := range t {
			m[k] = deepCopy(x)
		}
		return m
	case []interface{}:
		l := make([]interface{}, len(t))
		for i, x := range t {
			l[i] = deepCopy(x)
		}
		return l
	}
	return v
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: ssa-reference SCHEMA.yaml < cases.json")
		os.Exit(2)
	}
	schemaYAML, err := ioutil.ReadFile(os.Args[1])
	check(err)
	parser, err := typed.NewParser(typed.YAMLObject(schemaYAML))
	check(err)
	input, err := ioutil.ReadAll(os.Stdin)
	check(err)
	var cases struct {
		Cases []testCase `json:"cases"`
	}
	check(json.Unmarshal(input, &cases))
	results := []caseResult{}
	for _, c := range cases.Cases {
		results = append(results, run(parser, c))
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	check(enc.Encode(map[string]interface{}{"cases": results}))
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
