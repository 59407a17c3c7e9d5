package ui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"sort"
	"strings"
	"time"
)

var reportPage = template.Must(template.New("report.html").Funcs(template.FuncMap{
	"dur": func(d time.Duration) string {
		if d < time.Second {
			return d.Round(time.Millisecond).String()
		}
		return d.Round(100 * time.Millisecond).String()
	},
	"counts": func(m map[string]int) string {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		}
		return strings.Join(parts, ", ")
	},
}).ParseFS(assets, "assets/report.html"))

// ReportSession is one session in a report.
type ReportSession struct {
	ID      string
	Summary Summary
}

// WriteReport writes one self-contained HTML file of the sessions in h: a
// summary table per session (calls, errors, denials, approvals, time in bash,
// files changed with lines added and removed) and each timeline, with its
// styles, script and events inlined, so that it opens without a network.
func WriteReport(w io.Writer, h *Hub, title string) error {
	css, err := assets.ReadFile("assets/style.css")
	if err != nil {
		return err
	}
	js, err := assets.ReadFile("assets/app.js")
	if err != nil {
		return err
	}
	events := map[string][]json.RawMessage{}
	var sessions []ReportSession
	infos := h.Sessions()
	sort.SliceStable(infos, func(i, j int) bool { return infos[i].Started.Before(infos[j].Started) })
	for _, s := range infos {
		evs, _, _, _ := h.Events(s.ID, 0)
		events[s.ID] = evs
		sessions = append(sessions, ReportSession{ID: s.ID, Summary: Summarize(evs)})
	}
	data, err := json.Marshal(events)
	if err != nil {
		return err
	}
	var safe bytes.Buffer
	json.HTMLEscape(&safe, data) // no </script> can end the block early
	return reportPage.Execute(w, map[string]any{
		"Title":     title,
		"Generated": time.Now().UTC().Format(time.RFC3339),
		"Sessions":  sessions,
		"CSS":       template.CSS(css),
		"JS":        template.JS(js),
		"Events":    template.JS(safe.String()),
	})
}
