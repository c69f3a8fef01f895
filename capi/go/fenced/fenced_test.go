package fenced

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// Shapes of the mongo-go-driver's bson.M, bson.D and mongo.Pipeline, without the driver.
type (
	M map[string]any
	E struct {
		Key   string
		Value any
	}
	D        []E
	Pipeline []D
)

type m = map[string]any

func guard(field string, fence int64) m {
	return m{"$or": []any{
		m{field: m{"$exists": false}},
		m{field: m{"$lte": fence}},
	}}
}

func mustEqual(t *testing.T, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %#v\nwant %#v", got, want)
	}
}

func mustInvalid(t *testing.T, err error, substr string) {
	t.Helper()
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), substr) {
		t.Fatalf("want an ErrInvalidArgument mentioning %q, got %v", substr, err)
	}
}

func TestFilter(t *testing.T) {
	user := M{"_id": 42, "status": "open"}
	f, err := Filter(user, 7, "")
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, f, m{"_id": 42, "status": "open", "$and": []any{guard("_fence", 7)}})
	mustEqual(t, user, M{"_id": 42, "status": "open"}) // not modified

	f, err = Filter(nil, 1<<32, "tok")
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, f, m{"$and": []any{guard("tok", 1<<32)}})

	// The user's own $and keeps its clauses, the guard comes last.
	f, _ = Filter(D{{"_id", 1}, {"$and", []any{M{"a": 1}}}, {"$or", []any{M{"b": 1}}}}, 3, "")
	mustEqual(t, f, m{"_id": 1, "$and": []any{M{"a": 1}, guard("_fence", 3)},
		"$or": []any{M{"b": 1}}})
	f, _ = Filter(M{"$and": D{}}, 3, "")
	mustEqual(t, f, m{"$and": []any{guard("_fence", 3)}})

	// Anything else is wrapped: {$and: [filter, guard]}.
	type byID struct{ ID int }
	f, _ = Filter(byID{1}, 3, "")
	mustEqual(t, f, m{"$and": []any{byID{1}, guard("_fence", 3)}})
	f, _ = Filter(M{"$and": "bad"}, 3, "")
	mustEqual(t, f, m{"$and": []any{M{"$and": "bad"}, guard("_fence", 3)}})
	f, _ = Filter(D{{"a", 1}, {"a", 2}}, 3, "")
	mustEqual(t, f, m{"$and": []any{D{{"a", 1}, {"a", 2}}, guard("_fence", 3)}})
}

func TestInvalidFenceAndField(t *testing.T) {
	for _, fence := range []int64{0, -1} {
		_, err := Filter(M{}, fence, "")
		mustInvalid(t, err, "positive")
		_, err = Update(M{"$set": M{"a": 1}}, fence, "")
		mustInvalid(t, err, "positive")
		_, err = Replacement(M{}, fence, "")
		mustInvalid(t, err, "positive")
	}
	for _, field := range []string{"_id", "$f", "a.b"} {
		_, err := Filter(M{}, 1, field)
		mustInvalid(t, err, "top-level")
	}
}

func TestUpsertFilter(t *testing.T) {
	f, err := UpsertFilter(M{"_id": "x", "a": 1}, 5, "")
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, f, m{"_id": "x", "a": 1, "$and": []any{guard("_fence", 5)}})
	if _, err := UpsertFilter(D{{"_id", 9}}, 5, ""); err != nil {
		t.Fatal(err)
	}
	_, err = UpsertFilter(M{"a": 1}, 5, "")
	mustInvalid(t, err, "needs _id")
	_, err = UpsertFilter(M{"_id": M{"$in": []any{1, 2}}}, 5, "")
	mustInvalid(t, err, "plain _id")
	// An embedded document as _id is a plain value.
	if _, err := UpsertFilter(M{"_id": M{"a": 1}}, 5, ""); err != nil {
		t.Fatal(err)
	}
}

func TestUpdateOperators(t *testing.T) {
	user := M{"$set": M{"status": "paid"}, "$inc": M{"n": 1}}
	u, err := Update(user, 9, "")
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, u, m{"$set": m{"status": "paid", "_fence": int64(9)}, "$inc": M{"n": 1}})
	mustEqual(t, user, M{"$set": M{"status": "paid"}, "$inc": M{"n": 1}}) // not modified

	u, _ = Update(M{"$inc": M{"n": 1}}, 9, "f")
	mustEqual(t, u, m{"$inc": M{"n": 1}, "$set": m{"f": int64(9)}})

	u, _ = Update(D{{"$set", D{{"a", 1}, {"b", 2}}}, {"$unset", D{{"c", ""}}}}, 4, "")
	mustEqual(t, u, m{"$set": m{"a": 1, "b": 2, "_fence": int64(4)}, "$unset": D{{"c", ""}}})
}

func TestUpdateRejectsTouchingTheField(t *testing.T) {
	for _, bad := range []any{
		M{"$set": M{"_fence": 1}},
		M{"$inc": M{"_fence": 1}},
		M{"$unset": M{"_fence": ""}},
		M{"$set": M{"_fence.x": 1}},
		M{"$rename": M{"a": "_fence"}},
		M{"$rename": M{"_fence": "a"}},
		D{{"$max", D{{"_fence", 100}}}},
	} {
		_, err := Update(bad, 3, "")
		mustInvalid(t, err, "_fence")
	}
	// A field whose name only starts like the fence field is fine.
	if _, err := Update(M{"$set": M{"_fence_note": 1}}, 3, ""); err != nil {
		t.Fatal(err)
	}
	_, err := Update(M{"status": "paid"}, 3, "")
	mustInvalid(t, err, "not an operator")
	_, err = Update(M{}, 3, "")
	mustInvalid(t, err, "empty")
	_, err = Update(M{"$set": 5}, 3, "")
	mustInvalid(t, err, "must be a document")
	_, err = Update("x", 3, "")
	mustInvalid(t, err, "document or a pipeline")
}

func TestUpdatePipeline(t *testing.T) {
	p := Pipeline{D{{"$set", D{{"total", D{{"$add", []any{"$a", "$b"}}}}}}}}
	u, err := Update(p, 11, "")
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, u, []any{p[0], m{"$set": m{"_fence": int64(11)}}})

	u, _ = Update([]any{M{"$replaceWith": M{"a": 1}}, M{"$unset": []string{"b"}}}, 2, "tok")
	mustEqual(t, u, []any{M{"$replaceWith": M{"a": 1}}, M{"$unset": []string{"b"}},
		m{"$set": m{"tok": int64(2)}}})

	for _, bad := range []any{
		[]any{M{"$set": M{"_fence": 1}}},
		[]any{M{"$addFields": M{"_fence.a": 1}}},
		[]any{M{"$unset": "_fence"}},
		[]any{M{"$unset": []any{"x", "_fence"}}},
		[]any{M{"$project": M{"_fence": 0}}},
	} {
		_, err := Update(bad, 3, "")
		mustInvalid(t, err, "touches")
	}
	_, err = Update([]any{}, 3, "")
	mustInvalid(t, err, "empty")
	_, err = Update([]any{M{"$set": M{"a": 1}, "$unset": "b"}}, 3, "")
	mustInvalid(t, err, "one key")
}

func TestReplacement(t *testing.T) {
	user := M{"_id": 1, "status": "paid"}
	r, err := Replacement(user, 8, "")
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, r, m{"_id": 1, "status": "paid", "_fence": int64(8)})
	mustEqual(t, user, M{"_id": 1, "status": "paid"})
	r, _ = Replacement(D{{"a", 1}}, 8, "f")
	mustEqual(t, r, m{"a": 1, "f": int64(8)})
	r, _ = Replacement(nil, 8, "")
	mustEqual(t, r, m{"_fence": int64(8)})

	_, err = Replacement(M{"_fence": 3}, 8, "")
	mustInvalid(t, err, "fence field")
	_, err = Replacement(M{"$set": M{}}, 8, "")
	mustInvalid(t, err, "operator")
	_, err = Replacement(42, 8, "")
	mustInvalid(t, err, "must be a document")
}

func TestDecide(t *testing.T) {
	if err := Decide(nil, 5); err != nil {
		t.Fatal(err)
	}
	for _, cur := range []int64{1, 5} {
		if err := Decide(&cur, 5); err != nil {
			t.Fatalf("current %d: %v", cur, err)
		}
	}
	cur := int64(6)
	err := Decide(&cur, 5)
	var se *StaleFenceError
	if !errors.As(err, &se) || se.Fence != 5 || se.Current != 6 || !errors.Is(err, ErrStaleFence) {
		t.Fatalf("want StaleFenceError{5, 6}, got %#v", err)
	}
	if !strings.Contains(err.Error(), "5") || !strings.Contains(err.Error(), "6") {
		t.Fatalf("message names neither token: %v", err)
	}

	dup := errors.New("E11000 duplicate key")
	if got := DecideDuplicate(nil, 5, dup); got != dup {
		t.Fatalf("got %v", got)
	}
	low := int64(4)
	if got := DecideDuplicate(&low, 5, dup); got != dup {
		t.Fatalf("got %v", got)
	}
	if got := DecideDuplicate(&cur, 5, dup); !errors.Is(got, ErrStaleFence) {
		t.Fatalf("got %v", got)
	}
}

func TestCurrentFenceAndProjection(t *testing.T) {
	mustEqual(t, Projection(""), m{"_fence": 1})
	mustEqual(t, Projection("f"), m{"f": 1})
	for _, c := range []struct {
		doc  any
		want any
	}{
		{M{"_fence": int64(7)}, int64(7)},
		{M{"_fence": int32(7)}, int64(7)},
		{M{"_fence": 7.0}, int64(7)},
		{D{{"_id", 1}, {"_fence", int64(1 << 40)}}, int64(1 << 40)},
		{M{"_fence": 7.5}, nil},
		{M{"_fence": nil}, nil},
		{M{"_fence": "7"}, nil},
		{M{"other": 1}, nil},
		{nil, nil},
	} {
		got := CurrentFence(c.doc, "")
		if c.want == nil {
			if got != nil {
				t.Fatalf("%#v: got %d, want nil", c.doc, *got)
			}
		} else if got == nil || *got != c.want.(int64) {
			t.Fatalf("%#v: got %v, want %d", c.doc, got, c.want)
		}
	}
}
