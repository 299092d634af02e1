// Command oracle answers questions with the Go code kumaco imitates, for kumaco's
// differential tests: robfig/cron v3 ParseStandard + Schedule.Next, time.ParseDuration,
// k8s.io/apimachinery/pkg/labels.Parse + Matches, and metav1.LabelSelectorAsSelector, at
// the versions kube-apiserver v1.37.2 uses (this module's go.mod).
//
// Protocol: one JSON request per line on stdin, one JSON answer per line on stdout, in
// order. Requests:
//
//	{"op":"duration","input":"1h30m"}
//	  -> {"ok":true,"nanos":5400000000000,"string":"1h30m0s"} | {"ok":false,"error":"..."}
//	{"op":"cron","input":"CRON_TZ=Europe/Berlin 0 3 * * *","zone":"UTC","from":1700000000000000000,"count":3}
//	  -> {"ok":true,"next":[unix nanos,...]}   (0 = Go's zero time: never)
//	  -> {"ok":true,"every":1000000000}        (@every: the clamped, truncated delay)
//	  -> {"ok":false,"error":"..."}             (an error, or a panic in robfig)
//	{"op":"selector","input":"a in (x,y),!b","labels":[{"a":"x"},{}]}
//	  -> {"ok":true,"string":"a in (x,y),!b","matches":[true,true]} | {"ok":false,"error":"..."}
//	{"op":"labelselector","object":{"matchLabels":{"a":"x"},"matchExpressions":[...]},"labels":[{"a":"x"}]}
//	  -> {"ok":true,"string":"a=x","parts":["a=x"],"matches":[true]} | {"ok":false,"error":"..."}
//	{"op":"labelselectoryaml","input":"# zone a\nmatchLabels: {zone: a}","labels":[{"zone":"a"}]}
//	  -> as "labelselector", plus "nothing":true for Go's nil selector
//
// "object" is a metav1.LabelSelector in JSON, decoded by encoding/json with unknown
// fields refused (null is Go's nil selector); "parts" are its requirements' String(), in
// order. "input" of "labelselectoryaml" is text as a ConfigMap value holds it, read as
// Kubernetes reads YAML into its types: sigs.k8s.io/yaml.Unmarshal, which converts the
// YAML to JSON guided by the target's field types and decodes that leniently (unknown
// fields ignored, field names matched case-insensitively).
//
// "zone" is the time zone the caller's instant is expressed in (robfig uses it when the
// spec has no CRON_TZ/TZ prefix); "from" is in Unix nanoseconds.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/robfig/cron/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

type request struct {
	Op     string              `json:"op"`
	Input  string              `json:"input"`
	Zone   string              `json:"zone"`
	From   int64               `json:"from"`
	Count  int                 `json:"count"`
	Labels []map[string]string `json:"labels"`
	Object json.RawMessage     `json:"object"`
}

type answer struct {
	OK      bool     `json:"ok"`
	Error   string   `json:"error,omitempty"`
	Nanos   *int64   `json:"nanos,omitempty"`
	Next    []int64  `json:"next,omitempty"`
	Every   *int64   `json:"every,omitempty"`
	String  *string  `json:"string,omitempty"`
	Parts   []string `json:"parts,omitempty"`
	Matches []bool   `json:"matches,omitempty"`
	Nothing bool     `json:"nothing,omitempty"`
}

func main() {
	raw := bufio.NewReaderSize(os.Stdin, 1<<16)
	in := bufio.NewScanner(raw)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := bufio.NewWriterSize(os.Stdout, 1<<16)
	enc := json.NewEncoder(out)
	for in.Scan() {
		var req request
		var ans answer
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			ans = answer{Error: "bad request: " + err.Error()}
		} else {
			ans = handle(req)
		}
		if err := enc.Encode(ans); err != nil {
			fmt.Fprintln(os.Stderr, "oracle:", err)
			os.Exit(1)
		}
		// Flush only when no further input is already buffered, so batches stream
		// without a write per line and a single request still gets its answer.
		if raw.Buffered() == 0 {
			out.Flush()
		}
	}
	out.Flush()
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "oracle:", err)
		os.Exit(1)
	}
}

func handle(req request) answer {
	switch req.Op {
	case "duration":
		d, err := time.ParseDuration(req.Input)
		if err != nil {
			return answer{Error: err.Error()}
		}
		n, str := int64(d), d.String()
		return answer{OK: true, Nanos: &n, String: &str}
	case "cron":
		return cronAnswer(req)
	case "labelselector":
		var ps *metav1.LabelSelector
		dec := json.NewDecoder(bytes.NewReader(req.Object))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ps); err != nil {
			return answer{Error: "bad request: " + err.Error()}
		}
		return labelSelectorAnswer(ps, req.Labels)
	case "labelselectoryaml":
		var ps *metav1.LabelSelector
		if err := yaml.Unmarshal([]byte(req.Input), &ps); err != nil {
			return answer{Error: err.Error()}
		}
		return labelSelectorAnswer(ps, req.Labels)
	case "selector":
		sel, err := labels.Parse(req.Input)
		if err != nil {
			return answer{Error: err.Error()}
		}
		s := sel.String()
		ans := answer{OK: true, String: &s, Matches: []bool{}}
		for _, l := range req.Labels {
			ans.Matches = append(ans.Matches, sel.Matches(labels.Set(l)))
		}
		return ans
	default:
		return answer{Error: "unknown op " + req.Op}
	}
}

func labelSelectorAnswer(ps *metav1.LabelSelector, sets []map[string]string) answer {
	sel, err := metav1.LabelSelectorAsSelector(ps)
	if err != nil {
		return answer{Error: err.Error()}
	}
	s := sel.String()
	ans := answer{OK: true, String: &s, Parts: []string{}, Matches: []bool{}, Nothing: ps == nil}
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		ans.Parts = append(ans.Parts, r.String())
	}
	for _, l := range sets {
		ans.Matches = append(ans.Matches, sel.Matches(labels.Set(l)))
	}
	return ans
}

func cronAnswer(req request) (ans answer) {
	// robfig panics on some inputs (e.g. "TZ=UTC" with nothing after it); kumaco must
	// reject those, so a panic is reported as an error.
	defer func() {
		if r := recover(); r != nil {
			ans = answer{Error: fmt.Sprintf("panic: %v", r)}
		}
	}()
	sched, err := cron.ParseStandard(req.Input)
	if err != nil {
		return answer{Error: err.Error()}
	}
	if every, ok := sched.(cron.ConstantDelaySchedule); ok {
		n := int64(every.Delay)
		return answer{OK: true, Every: &n}
	}
	loc, err := time.LoadLocation(req.Zone)
	if err != nil {
		return answer{Error: "bad zone in request: " + err.Error()}
	}
	t := time.Unix(0, req.From).In(loc)
	next := []int64{}
	for i := 0; i < req.Count; i++ {
		t = sched.Next(t)
		if t.IsZero() {
			next = append(next, 0)
			break
		}
		next = append(next, t.UnixNano())
	}
	return answer{OK: true, Next: next}
}
