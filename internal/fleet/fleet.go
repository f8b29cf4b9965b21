// Package fleet runs many model instances: one model, or one tenant of a
// model that fans out over a tenant list. It picks the instances of a
// shard by a stable hash, so that N processes split the work without
// talking to each other, and runs them at most N at a time, each to its
// own end: one instance's failure stops none of the others.
//
// Racing processes need no coordination beyond this: the commit protocol
// (create-if-absent commits) already keeps two runs of one instance safe.
package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
)

// Instance names one model instance.
type Instance struct {
	Model string
	// Tenant is nil for a model without tenants.
	Tenant *string
}

// String names the instance in logs and summaries: the model, and for a
// tenant the quoted tenant value in brackets, so that the empty tenant and values with
// spaces or brackets stay readable and unambiguous.
func (i Instance) String() string {
	if i.Tenant == nil {
		return i.Model
	}
	return i.Model + "[" + strconv.Quote(*i.Tenant) + "]"
}

// Hash is the stable hash that places an instance in a shard: FNV-1a of
// the model name, and for a tenant a NUL and the tenant value (a model
// name holds no NUL, so no two instances hash the same bytes). It must
// never change: processes of different versions split one fleet by it.
func (i Instance) Hash() uint64 {
	h := fnv.New64a()
	h.Write([]byte(i.Model))
	if i.Tenant != nil {
		h.Write([]byte{0})
		h.Write([]byte(*i.Tenant))
	}
	return h.Sum64()
}

// Shard is the part I of N of a fleet that one process takes.
type Shard struct {
	Index, Count int
}

// All is the shard of a process that takes every instance.
var All = Shard{Index: 0, Count: 1}

// ParseShard reads "I/N", with 0 <= I < N.
func ParseShard(s string) (Shard, error) {
	is, ns, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(is)
	n, err2 := strconv.Atoi(ns)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return Shard{}, fmt.Errorf("shard %q is not I/N with 0 <= I < N (such as 0/4)", s)
	}
	return Shard{Index: i, Count: n}, nil
}

// Has says whether the instance belongs to the shard.
func (s Shard) Has(i Instance) bool {
	return s.Count <= 1 || i.Hash()%uint64(s.Count) == uint64(s.Index)
}

func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// Status is how an instance's run ended.
type Status string

// The statuses of a summary.
const (
	Done    Status = "done"
	Failed  Status = "failed"
	Skipped Status = "skipped" // not started: the run was interrupted first
)

// Outcome is one instance's result.
type Outcome struct {
	Instance
	Status Status
	// Detail is the one-line result of a done instance.
	Detail string
	// Err is why the instance failed or was skipped.
	Err error
}

// Summary holds the outcome of every instance, in the order given.
type Summary struct {
	Outcomes []Outcome
	// OtherShards counts the instances left to other shards.
	OtherShards int
}

// Count returns how many instances ended with st.
func (s *Summary) Count(st Status) int {
	n := 0
	for _, o := range s.Outcomes {
		if o.Status == st {
			n++
		}
	}
	return n
}

// MarshalJSON writes the summary as one object: the counts, and one entry
// per instance with its one-line reason.
func (s *Summary) MarshalJSON() ([]byte, error) {
	type entry struct {
		Model  string  `json:"model"`
		Tenant *string `json:"tenant,omitempty"`
		Status Status  `json:"status"`
		Detail string  `json:"detail,omitempty"`
		Error  string  `json:"error,omitempty"`
	}
	out := struct {
		Done        int     `json:"done"`
		Failed      int     `json:"failed"`
		Skipped     int     `json:"skipped"`
		OtherShards int     `json:"other_shards"`
		Instances   []entry `json:"instances"`
	}{Done: s.Count(Done), Failed: s.Count(Failed), Skipped: s.Count(Skipped), OtherShards: s.OtherShards, Instances: []entry{}}
	for _, o := range s.Outcomes {
		e := entry{Model: o.Model, Tenant: o.Tenant, Status: o.Status, Detail: o.Detail}
		if o.Err != nil {
			e.Error = OneLine(o.Err.Error())
		}
		out.Instances = append(out.Instances, e)
	}
	return json.Marshal(out)
}

// OneLine keeps a reason to one line.
func OneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// ErrInterrupted is the reason of an instance skipped because the run's
// context ended before it started.
var ErrInterrupted = errors.New("not started: interrupted")

// Run calls do for every instance, at most parallel at a time, and
// returns every outcome. slot, in [0, parallel), is the worker that runs
// the instance: one slot runs one instance at a time, so a caller keeps
// one source connection per slot. A failure is recorded and the others go
// on; once ctx ends, the instances not started are skipped.
func Run(ctx context.Context, parallel int, insts []Instance, do func(ctx context.Context, slot, i int) (string, error)) *Summary {
	s := &Summary{Outcomes: make([]Outcome, len(insts))}
	for i, inst := range insts {
		s.Outcomes[i] = Outcome{Instance: inst, Status: Skipped, Err: ErrInterrupted}
	}
	parallel = max(1, min(parallel, len(insts)))
	next := make(chan int)
	var wg sync.WaitGroup
	for slot := range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				detail, err := do(ctx, slot, i)
				o := &s.Outcomes[i]
				if err != nil {
					o.Status, o.Err = Failed, err
				} else {
					o.Status, o.Detail, o.Err = Done, detail, nil
				}
			}
		}()
	}
feed:
	for i := range insts {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	return s
}
