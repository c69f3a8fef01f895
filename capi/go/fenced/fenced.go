// Package fenced builds MongoDB filter and update documents that make a write to your
// own data conditional on a fencing token (the Fence of a mongoelector lock, lease,
// elector or semaphore hold): the write applies only if the document's stored token is
// absent or <= yours, and it stores yours. A paused or partitioned former holder whose
// lock was taken over (release, expiry or force) then cannot overwrite what the newer
// holder wrote: its late write matches nothing.
//
// The package has no dependencies and no cgo: it returns plain Go values
// (map[string]any, []any, int64) that you pass to your own driver, e.g. the
// mongo-go-driver:
//
//	f, _ := fenced.Filter(bson.M{"_id": 42}, fence, "") // or UpsertFilter for an upsert
//	u, _ := fenced.Update(bson.M{"$set": bson.M{"status": "paid"}}, fence, "")
//	res, err := coll.UpdateOne(ctx, f, u)
//	if err == nil && res.MatchedCount == 0 {
//		var cur struct{ Fence *int64 `bson:"_fence"` }
//		err = coll.FindOne(ctx, bson.M{"_id": 42}, options.FindOne().SetProjection(fenced.Projection(""))).Decode(&cur)
//		if err == nil { err = fenced.Decide(cur.Fence, fence) } // *StaleFenceError if newer
//	}
//
// Documents given to the functions may be maps with string keys (map[string]any,
// bson.M) or ordered documents (slices of structs with Key and Value fields, such as
// bson.D); pipelines are slices of such documents (mongo.Pipeline, bson.A, []any).
package fenced

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
)

// DefaultField is the field that stores the token when field is "".
const DefaultField = "_fence"

// ErrStaleFence matches every *StaleFenceError with errors.Is.
var ErrStaleFence = errors.New("fenced: stale fencing token")

// ErrInvalidArgument matches the errors of bad arguments (fence, field, documents).
var ErrInvalidArgument = errors.New("fenced: invalid argument")

// StaleFenceError: the document carries a newer token (Current) than the writer's
// (Fence); nothing was written.
type StaleFenceError struct {
	Fence   int64 // the writer's token
	Current int64 // the token stored in the document
}

func (e *StaleFenceError) Error() string {
	return fmt.Sprintf("fenced: stale fencing token %d: the document carries %d "+
		"(written by a newer holder); nothing was written", e.Fence, e.Current)
}

// Is makes errors.Is(err, ErrStaleFence) true.
func (e *StaleFenceError) Is(target error) bool { return target == ErrStaleFence }

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidArgument, fmt.Sprintf(format, a...))
}

func check(fence int64, field string) (string, error) {
	if fence <= 0 {
		return "", invalid("fence must be a positive token, got %d", fence)
	}
	if field == "" {
		field = DefaultField
	}
	if field == "_id" || strings.HasPrefix(field, "$") || strings.Contains(field, ".") {
		return "", invalid("field %q must be a top-level field name other than _id", field)
	}
	return field, nil
}

// Guard is the condition "field absent or <= fence".
func Guard(fence int64, field string) (map[string]any, error) {
	field, err := check(fence, field)
	if err != nil {
		return nil, err
	}
	return map[string]any{"$or": []any{
		map[string]any{field: map[string]any{"$exists": false}},
		map[string]any{field: map[string]any{"$lte": fence}},
	}}, nil
}

// Filter is userFilter with the guard added to its $and: {<userFilter's fields>, $and:
// [<userFilter's $and clauses>..., {$or: [{field: {$exists: false}}, {field: {$lte:
// fence}}]}]}, the same query as {$and: [userFilter, guard]}; but an upsert finds the
// filter's _id at the top level, where FerretDB (and mongomock) take it for the inserted
// document. A userFilter that is neither a map nor an ordered document (a struct) gives
// {$and: [userFilter, guard]}. Use it for updates, replacements and deletes.
func Filter(userFilter any, fence int64, field string) (map[string]any, error) {
	g, err := Guard(fence, field)
	if err != nil {
		return nil, err
	}
	if userFilter == nil {
		return map[string]any{"$and": []any{g}}, nil
	}
	d, ok := asDoc(userFilter)
	if !ok {
		return map[string]any{"$and": []any{userFilter, g}}, nil
	}
	out := make(map[string]any, len(d.keys)+1)
	for _, k := range d.keys {
		out[k] = d.get(k)
	}
	ands := []any{}
	if v, has := out["$and"]; has {
		rv := reflect.ValueOf(v)
		if v == nil || (rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array) {
			return map[string]any{"$and": []any{userFilter, g}}, nil
		}
		for i := 0; i < rv.Len(); i++ {
			ands = append(ands, rv.Index(i).Interface())
		}
	}
	if len(out) != len(d.keys) { // repeated keys: keep the document as given
		return map[string]any{"$and": []any{userFilter, g}}, nil
	}
	out["$and"] = append(ands, g)
	return out, nil
}

// UpsertFilter is Filter for an upsert, which needs an _id with a plain value in
// userFilter: a stale upsert then fails with a duplicate key error (E11000, see
// DecideDuplicate) instead of inserting a second document.
func UpsertFilter(userFilter any, fence int64, field string) (map[string]any, error) {
	id, ok := lookup(userFilter, "_id")
	if !ok {
		return nil, invalid("an upsert filter needs _id: without a unique key a stale " +
			"upsert inserts a second document instead of failing")
	}
	if d, isDoc := asDoc(id); isDoc {
		for _, k := range d.keys {
			if strings.HasPrefix(k, "$") {
				return nil, invalid("an upsert filter needs a plain _id value, not %q", k)
			}
		}
	}
	return Filter(userFilter, fence, field)
}

// Update adds {$set: {field: fence}} to an operator update (merged into its $set) or
// appends the stage {$set: {field: fence}} to a pipeline update. It rejects updates that
// write or remove field themselves. The result is map[string]any or []any.
func Update(userUpdate any, fence int64, field string) (any, error) {
	field, err := check(fence, field)
	if err != nil {
		return nil, err
	}
	if d, ok := asDoc(userUpdate); ok {
		if len(d.keys) == 0 {
			return nil, invalid("empty update")
		}
		out := make(map[string]any, len(d.keys)+1)
		for _, op := range d.keys {
			if !strings.HasPrefix(op, "$") {
				return nil, invalid("update key %q is not an operator (use Replacement)", op)
			}
			v := d.get(op)
			args, isDoc := asDoc(v)
			if !isDoc {
				return nil, invalid("argument of %s must be a document", op)
			}
			for _, p := range args.keys {
				if touches(p, field) {
					return nil, invalid("update %s touches %q, the fence field", op, p)
				}
				if op == "$rename" {
					if s, ok := args.get(p).(string); ok && touches(s, field) {
						return nil, invalid("update $rename targets %q, the fence field", s)
					}
				}
			}
			out[op] = v
		}
		set := map[string]any{}
		if v, ok := out["$set"]; ok {
			args, _ := asDoc(v)
			for _, k := range args.keys {
				set[k] = args.get(k)
			}
		}
		set[field] = fence
		out["$set"] = set
		return out, nil
	}
	rv := reflect.ValueOf(userUpdate)
	if userUpdate == nil || (rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array) {
		return nil, invalid("update must be a document or a pipeline, got %T", userUpdate)
	}
	if rv.Len() == 0 {
		return nil, invalid("empty update pipeline")
	}
	out := make([]any, 0, rv.Len()+1)
	for i := 0; i < rv.Len(); i++ {
		stage := rv.Index(i).Interface()
		d, ok := asDoc(stage)
		if !ok || len(d.keys) != 1 {
			return nil, invalid("pipeline stage %d must be a document with one key", i)
		}
		if p, bad := stageTouches(d.keys[0], d.get(d.keys[0]), field); bad {
			return nil, invalid("pipeline stage %d (%s) touches %q, the fence field", i, d.keys[0], p)
		}
		out = append(out, stage)
	}
	return append(out, map[string]any{"$set": map[string]any{field: fence}}), nil
}

// Replacement is doc with field = fence (a copy; doc itself is not changed). Use it as
// the replacement of a replace (with Filter) and as the document of an insert (the
// unique _id is then the guard: see DecideDuplicate). doc must not hold field.
func Replacement(doc any, fence int64, field string) (map[string]any, error) {
	field, err := check(fence, field)
	if err != nil {
		return nil, err
	}
	if doc == nil {
		doc = map[string]any{}
	}
	d, ok := asDoc(doc)
	if !ok {
		return nil, invalid("replacement must be a document, got %T", doc)
	}
	out := make(map[string]any, len(d.keys)+1)
	for _, k := range d.keys {
		if strings.HasPrefix(k, "$") {
			return nil, invalid("replacement key %q is an operator (use Update)", k)
		}
		if k == field {
			return nil, invalid("replacement holds %q, the fence field", k)
		}
		out[k] = d.get(k)
	}
	out[field] = fence
	return out, nil
}

// Projection is {field: 1}: what to read to decide a write that matched nothing.
func Projection(field string) map[string]any {
	if field == "" {
		field = DefaultField
	}
	return map[string]any{field: 1}
}

// Decide is the answer for a fenced write that matched nothing, given the token stored in
// the document its filter finds now (nil: no such document, or no token in it): a
// *StaleFenceError if that token is newer than ours, else nil (nothing matched: as an
// unfenced write that found no document).
func Decide(currentFence *int64, ours int64) error {
	if currentFence != nil && *currentFence > ours {
		return &StaleFenceError{Fence: ours, Current: *currentFence}
	}
	return nil
}

// DecideDuplicate is Decide for a fenced upsert or insert that failed with a duplicate
// key error (E11000): given the token of the document holding that _id, a
// *StaleFenceError if it is newer than ours, else dupErr itself. After an upsert's
// E11000 that is not stale, retry the upsert once (a writer may have inserted the
// document concurrently).
func DecideDuplicate(currentFence *int64, ours int64, dupErr error) error {
	if err := Decide(currentFence, ours); err != nil {
		return err
	}
	return dupErr
}

// CurrentFence reads field from a decoded document (a map with string keys or an
// ordered document): the token as int64, or nil when absent or not an integer.
func CurrentFence(doc any, field string) *int64 {
	if field == "" {
		field = DefaultField
	}
	v, ok := lookup(doc, field)
	if !ok || v == nil {
		return nil
	}
	var n int64
	switch x := v.(type) {
	case int64:
		n = x
	case int32:
		n = int64(x)
	case int:
		n = int64(x)
	case float64:
		if x != math.Trunc(x) || x < math.MinInt64 || x >= math.MaxInt64 {
			return nil
		}
		n = int64(x)
	default:
		return nil
	}
	return &n
}

// touches: path p writes field or something inside it.
func touches(p, field string) bool {
	return p == field || strings.HasPrefix(p, field+".")
}

func stageTouches(op string, arg any, field string) (string, bool) {
	switch op {
	case "$set", "$addFields", "$project":
		if d, ok := asDoc(arg); ok {
			for _, k := range d.keys {
				if touches(k, field) {
					return k, true
				}
			}
		}
	case "$unset":
		if s, ok := arg.(string); ok {
			return s, touches(s, field)
		}
		rv := reflect.ValueOf(arg)
		if arg != nil && (rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array) {
			for i := 0; i < rv.Len(); i++ {
				if s, ok := rv.Index(i).Interface().(string); ok && touches(s, field) {
					return s, true
				}
			}
		}
	}
	return "", false
}

// doc is a read-only view of a map with string keys or of an ordered document.
type doc struct {
	keys []string
	get  func(string) any
}

var emptyDoc = doc{get: func(string) any { return nil }}

func asDoc(v any) (doc, bool) {
	if v == nil {
		return emptyDoc, false
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return emptyDoc, false
		}
		keys := make([]string, 0, rv.Len())
		for _, k := range rv.MapKeys() {
			keys = append(keys, k.String())
		}
		sort.Strings(keys)
		kt := rv.Type().Key()
		return doc{keys: keys, get: func(k string) any {
			e := rv.MapIndex(reflect.ValueOf(k).Convert(kt))
			if !e.IsValid() {
				return nil
			}
			return e.Interface()
		}}, true
	case reflect.Slice, reflect.Array:
		et := rv.Type().Elem()
		if et.Kind() != reflect.Struct {
			return emptyDoc, false
		}
		kf, ok1 := et.FieldByName("Key")
		vf, ok2 := et.FieldByName("Value")
		if !ok1 || !ok2 || kf.Type.Kind() != reflect.String {
			return emptyDoc, false
		}
		keys := make([]string, rv.Len())
		vals := make(map[string]any, rv.Len())
		for i := 0; i < rv.Len(); i++ {
			e := rv.Index(i)
			keys[i] = e.FieldByIndex(kf.Index).String()
			if _, dup := vals[keys[i]]; !dup {
				vals[keys[i]] = e.FieldByIndex(vf.Index).Interface()
			}
		}
		return doc{keys: keys, get: func(k string) any { return vals[k] }}, true
	}
	return emptyDoc, false
}

func lookup(v any, key string) (any, bool) {
	d, ok := asDoc(v)
	if !ok {
		return nil, false
	}
	for _, k := range d.keys {
		if k == key {
			return d.get(k), true
		}
	}
	return nil, false
}
