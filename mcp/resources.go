package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corralhq/corral/checkpoint"
)

// The session's checkpoints, and an isolated session's changes, as MCP
// resources: the model (and the user, through the client) can review what
// the session did. Reading only: a model cannot restore a checkpoint. A
// restore rewrites the whole tree, files the user changed since included —
// the one thing the file tools never do (they refuse a file changed since it
// was read) — and it is the user's way back from what the agent did, so it
// stays the user's (corral restore, which also refuses while a session runs).
// A model that wants its own change undone edits the file back, checkpointed
// like any change.

const (
	checkpointsURI    = "corral://checkpoints"
	checkpointDiffURI = "corral://checkpoints/{id}/diff"
	isolatedDiffURI   = "corral://isolated/diff"
	// maxResourceText bounds the text of one resource; a longer diff is cut,
	// and says so.
	maxResourceText = 1 << 20
)

func (m *Server) addResources() {
	m.server.AddResource(&sdk.Resource{
		URI: checkpointsURI, Name: "checkpoints", Title: "This session's checkpoints", MIMEType: "text/plain",
		Description: "The checkpoints corral took of the workspace before each call of this session that could change it: id, time, call, tool, what the calls since the one before changed. Read " + checkpointDiffURI + " for what changed since one. Only the user can restore a checkpoint (corral restore).",
	}, m.readCheckpoints)
	m.server.AddResourceTemplate(&sdk.ResourceTemplate{
		URITemplate: checkpointDiffURI, Name: "checkpoint-diff", Title: "What changed since a checkpoint", MIMEType: "text/x-diff",
		Description: "A unified diff, after a summary of the files, of everything that changed in the workspace since checkpoint {id} of this session (the workspace as it was just before that call).",
	}, m.readCheckpointDiff)
	if m.host.Isolation() != nil {
		m.server.AddResource(&sdk.Resource{
			URI: isolatedDiffURI, Name: "isolated-diff", Title: "This session's changes to its copy", MIMEType: "text/x-diff",
			Description: "A unified diff of what this isolated session changed in its private copy of the workspace: what the user brings into their tree with corral apply.",
		}, m.readIsolatedDiff)
	}
}

// textResult is a resource's text.
func textResult(uri, mime, text string) *sdk.ReadResourceResult {
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: mime, Text: text}}}
}

func (m *Server) readCheckpoints(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	ms, err := m.session(ctx, req.Session)
	if err != nil {
		return nil, err
	}
	store := ms.s.Checkpoints()
	if store == nil {
		return textResult(req.Params.URI, "text/plain", "This session takes no checkpoints: corral runs with --no-checkpoints, or cannot keep them here.\n"), nil
	}
	all, err := store.List(ctx)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("Checkpoints of this session, oldest first. Checkpoint N holds the workspace as it was just before the call it names; CHANGED is what that call changed (for the last one, what changed since). Read corral://checkpoints/N/diff for everything that changed since N. Only the user can restore one.\n\n")
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTIME\tCALL\tTOOL\tWHAT\tCHANGED")
	n := 0
	for i, c := range all {
		if c.Session != ms.s.Sandbox().Session() {
			continue
		}
		n++
		what := c.Command
		if what == "" {
			what = c.Path
		}
		var did string
		switch {
		case i+1 < len(all) && all[i+1].ID == c.ID+1:
			next := all[i+1]
			did = summary(next.Files, next.Added, next.Removed, next.Changed)
		case i+1 == len(all):
			ch, err := store.Changes(ctx, c.ID, checkpoint.Worktree)
			if err != nil {
				return nil, err
			}
			a, r := 0, 0
			for _, x := range ch {
				a, r = a+max(x.Added, 0), r+max(x.Removed, 0)
			}
			did = summary(len(ch), a, r, ch)
		default:
			did = "?" // the checkpoint after it was removed
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", c.ID, c.Time.Format("15:04:05"), c.Call, c.Tool, oneLine(what, 60), did)
	}
	tw.Flush()
	if n == 0 {
		return textResult(req.Params.URI, "text/plain", "This session has no checkpoint yet: corral takes one before each call that may change the workspace.\n"), nil
	}
	return textResult(req.Params.URI, "text/plain", b.String()), nil
}

// summary says what changed: files, lines, the first paths.
func summary(files, added, removed int, ch []checkpoint.Change) string {
	if files == 0 {
		return "nothing"
	}
	var ps []string
	for i, x := range ch {
		if i == 5 {
			ps = append(ps, fmt.Sprintf("%d more", files-5))
			break
		}
		ps = append(ps, x.Status+" "+x.Path)
	}
	return fmt.Sprintf("%d file(s) +%d -%d: %s", files, added, removed, strings.Join(ps, ", "))
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func (m *Server) readCheckpointDiff(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	uri := req.Params.URI
	idText, ok := strings.CutPrefix(uri, "corral://checkpoints/")
	if ok {
		idText, ok = strings.CutSuffix(idText, "/diff")
	}
	id, err := strconv.Atoi(idText)
	if !ok || err != nil || id <= 0 {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	ms, err := m.session(ctx, req.Session)
	if err != nil {
		return nil, err
	}
	store := ms.s.Checkpoints()
	if store == nil {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	c, err := store.Get(ctx, id)
	if errors.Is(err, checkpoint.ErrNotFound) || err == nil && c.Session != ms.s.Sandbox().Session() {
		// Another session's checkpoints are not this one's to read.
		return nil, sdk.ResourceNotFoundError(uri)
	}
	if err != nil {
		return nil, err
	}
	w := &cappedBuffer{max: maxResourceText}
	if err := store.Diff(ctx, w, id, checkpoint.Worktree); err != nil {
		return nil, err
	}
	return textResult(uri, "text/x-diff", w.text(fmt.Sprintf("nothing changed since checkpoint %d", id))), nil
}

func (m *Server) readIsolatedDiff(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	ms, err := m.session(ctx, req.Session)
	if err != nil {
		return nil, err
	}
	cp := ms.s.Copy()
	if cp == nil {
		return nil, sdk.ResourceNotFoundError(req.Params.URI)
	}
	w := &cappedBuffer{max: maxResourceText}
	if err := cp.Diff(ctx, w); err != nil {
		return nil, err
	}
	return textResult(req.Params.URI, "text/x-diff", w.text("the session has changed nothing in its copy yet")), nil
}

// cappedBuffer keeps the first max bytes written to it and counts the rest.
type cappedBuffer struct {
	b       bytes.Buffer
	max     int
	dropped int64
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	room := c.max - c.b.Len()
	if room >= len(p) {
		c.b.Write(p)
		return len(p), nil
	}
	if room > 0 {
		c.b.Write(p[:room])
	}
	c.dropped += int64(len(p) - max(room, 0))
	return len(p), nil
}

// text is what was kept, with a line saying what was not; empty says so.
func (c *cappedBuffer) text(empty string) string {
	if c.b.Len() == 0 {
		return "(" + empty + ")\n"
	}
	s := c.b.String()
	if c.dropped > 0 {
		s += fmt.Sprintf("\n[the diff goes on for %d more bytes: run corral diff, or read the files]\n", c.dropped)
	}
	return s
}
