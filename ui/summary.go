package ui

import (
	"encoding/json"
	"sort"
	"time"
)

// Summary counts what happened in a run.
type Summary struct {
	Calls  int            `json:"calls"`
	ByTool map[string]int `json:"by_tool"`
	// Errors are calls whose result is an error (a refusal included) or that
	// failed.
	Errors int `json:"errors"`
	// Denials are bash commands the policy denied.
	Denials int `json:"denials"`
	// Approvals are the approvals asked; Decisions counts their answers.
	Approvals int            `json:"approvals"`
	Decisions map[string]int `json:"decisions"`
	// Remembered are commands run on an approval given earlier in the session.
	Remembered int `json:"remembered"`
	// BashTime is the time spent in bash calls.
	BashTime time.Duration `json:"bash_time_ns"`
	Duration time.Duration `json:"duration_ns"`
	Files    []FileChange  `json:"files"`
	// Other counts the events of other types (network decisions, outside file
	// changes), by type.
	Other map[string]int `json:"other,omitempty"`
}

// FileChange is what a run's edits and writes did to one file.
type FileChange struct {
	Path    string `json:"path"`
	Added   int    `json:"added"`
	Removed int    `json:"removed"`
	Edits   int    `json:"edits"`
	Created bool   `json:"created,omitempty"`
}

// Summarize reads a run's events (as the Hub holds them, or lines of an events
// file).
func Summarize(events []json.RawMessage) Summary {
	sum := Summary{ByTool: map[string]int{}, Decisions: map[string]int{}, Other: map[string]int{}}
	files := map[string]*FileChange{}
	var first, last time.Time
	for _, raw := range events {
		var e struct {
			Type     string        `json:"type"`
			Time     time.Time     `json:"time"`
			Tool     string        `json:"tool"`
			Error    string        `json:"error"`
			Duration time.Duration `json:"duration_ns"`
			Result   *struct {
				IsError bool `json:"is_error"`
				Details struct {
					Verdict *struct {
						Decision string `json:"decision"`
					} `json:"verdict"`
					Remembered bool   `json:"remembered"`
					Ran        bool   `json:"ran"`
					Path       string `json:"path"`
					Added      int    `json:"added"`
					Removed    int    `json:"removed"`
					Created    bool   `json:"created"`
					Diff       string `json:"diff"`
				} `json:"details"`
			} `json:"result"`
			Answer *struct {
				Decision string `json:"decision"`
			} `json:"answer"`
		}
		if json.Unmarshal(raw, &e) != nil {
			continue
		}
		if !e.Time.IsZero() {
			if first.IsZero() {
				first = e.Time
			}
			last = e.Time
		}
		switch e.Type {
		case "call_start":
			sum.Calls++
			sum.ByTool[e.Tool]++
		case "call_end":
			if e.Tool == "bash" {
				sum.BashTime += e.Duration
			}
			if e.Error != "" || (e.Result != nil && e.Result.IsError) {
				sum.Errors++
			}
			if e.Result == nil {
				continue
			}
			d := e.Result.Details
			if d.Verdict != nil && d.Verdict.Decision == "deny" {
				sum.Denials++
			}
			if d.Remembered {
				sum.Remembered++
			}
			if (e.Tool == "edit" || e.Tool == "write") && !e.Result.IsError && d.Path != "" && (d.Diff != "" || d.Created) {
				f := files[d.Path]
				if f == nil {
					f = &FileChange{Path: d.Path}
					files[d.Path] = f
				}
				f.Added += d.Added
				f.Removed += d.Removed
				f.Edits++
				f.Created = f.Created || d.Created
			}
		case "approval":
			sum.Approvals++
		case "approval_end":
			if e.Answer != nil {
				sum.Decisions[e.Answer.Decision]++
			}
		case "output":
		default:
			sum.Other[e.Type]++
		}
	}
	if !first.IsZero() {
		sum.Duration = last.Sub(first)
	}
	for _, f := range files {
		sum.Files = append(sum.Files, *f)
	}
	sort.Slice(sum.Files, func(i, j int) bool { return sum.Files[i].Path < sum.Files[j].Path })
	return sum
}
