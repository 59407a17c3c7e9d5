package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// decodeArgs decodes a tool's JSON arguments into p, a pointer to its params
// struct. It returns "" on success, else a message for the model that names the
// argument at fault and what the tool takes. A field whose json tag lacks
// omitempty is required.
func decodeArgs(tool string, raw json.RawMessage, p any) string {
	fields := paramFields(reflect.TypeOf(p).Elem())
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		raw = []byte("{}")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Sprintf("The arguments of %s must be a JSON object, got %s. %s", tool, describeJSON(err), usageOf(tool, fields))
	}
	known := map[string]paramField{}
	for _, f := range fields {
		known[f.name] = f
	}
	var unknown []string
	for k := range m {
		if _, ok := known[k]; !ok {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return fmt.Sprintf("Unknown argument %s for %s. %s", quoteList(unknown), tool, usageOf(tool, fields))
	}
	for _, f := range fields {
		v, ok := m[f.name]
		if f.required && (!ok || bytes.Equal(bytes.TrimSpace(v), []byte("null"))) {
			return fmt.Sprintf("Missing required argument %q for %s. %s", f.name, tool, usageOf(tool, fields))
		}
	}
	for _, f := range fields {
		v, ok := m[f.name]
		if !ok || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			continue
		}
		dst := reflect.New(f.typ)
		if err := json.Unmarshal(v, dst.Interface()); err != nil {
			return fmt.Sprintf("Argument %q of %s must be %s, got %s. %s", f.name, tool, kindName(f.typ), describeJSON(err), usageOf(tool, fields))
		}
		reflect.ValueOf(p).Elem().FieldByIndex(f.index).Set(dst.Elem())
	}
	return ""
}

type paramField struct {
	name     string
	index    []int
	typ      reflect.Type
	required bool
}

func paramFields(t reflect.Type) []paramField {
	var out []paramField
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" || !sf.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = sf.Name
		}
		out = append(out, paramField{
			name:     name,
			index:    sf.Index,
			typ:      sf.Type,
			required: !strings.Contains(opts, "omitempty"),
		})
	}
	return out
}

func usageOf(tool string, fields []paramField) string {
	var parts []string
	for _, f := range fields {
		s := f.name + " (" + kindName(f.typ)
		if !f.required {
			s += ", optional"
		}
		parts = append(parts, s+")")
	}
	return fmt.Sprintf("%s takes %s.", tool, strings.Join(parts, ", "))
}

func kindName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a " + t.Kind().String()
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

// describeJSON names what a JSON value that failed to decode is, for a message:
// "a JSON string", or the syntax error when it is not JSON at all.
func describeJSON(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return "a JSON " + te.Value
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return "invalid JSON (" + se.Error() + ")"
	}
	return "an invalid value (" + err.Error() + ")"
}
