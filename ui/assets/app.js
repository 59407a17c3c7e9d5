// corral's web view: renders a session's events as a timeline. Used by the live
// pages (events from /api/sessions/{id}/events) and by reports (events inlined).
// Everything from events is put in the page as text, never as HTML.
"use strict";

(function () {
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function section(label, child) {
    const s = el("div", "section");
    s.appendChild(el("div", "label", label));
    if (child) s.appendChild(child);
    return s;
  }
  function dur(ns) {
    if (!ns) return "";
    const ms = ns / 1e6;
    if (ms < 1000) return ms.toFixed(ms < 10 ? 1 : 0) + " ms";
    const s = ms / 1000;
    if (s < 120) return s.toFixed(1) + " s";
    return Math.floor(s / 60) + " min " + Math.round(s % 60) + " s";
  }
  function clock(t) {
    if (!t) return "";
    const d = new Date(t);
    return isNaN(d) ? "" : d.toLocaleTimeString();
  }

  // Terminal renders a raw output stream: SGR colours and styles become
  // spans; every other escape sequence (cursor moves, titles, clears, ...) is
  // dropped, never acted on. A carriage return not followed by a newline
  // starts the line again, as a terminal would show a progress bar.
  const MAX_TERM_CHARS = 2 << 20;
  class Terminal {
    constructor(root) {
      this.root = root;
      this.pending = "";
      this.st = {};
      this.chars = 0;
      this.newLine();
    }
    newLine() {
      this.line = el("div", "line");
      this.root.appendChild(this.line);
    }
    write(data) {
      if (this.chars > MAX_TERM_CHARS) return;
      let s = this.pending + data;
      this.pending = "";
      let text = "";
      const flush = () => {
        if (text) { this.span(text); text = ""; }
      };
      for (let i = 0; i < s.length; i++) {
        const c = s[i];
        if (c === "\x1b") {
          flush();
          const end = this.escapeEnd(s, i);
          if (end < 0) { this.pending = s.slice(i); break; }
          const seq = s.slice(i, end);
          if (seq[1] === "[" && seq[seq.length - 1] === "m") this.sgr(seq.slice(2, -1));
          i = end - 1;
        } else if (c === "\n") {
          flush(); this.newLine();
        } else if (c === "\r") {
          if (i + 1 === s.length) { flush(); this.pending = "\r"; break; }
          if (s[i + 1] !== "\n") { flush(); this.line.textContent = ""; }
        } else if (c === "\t" || c >= " " && c !== "\x7f" && !(c >= "\x80" && c <= "\x9f")) {
          text += c;
        }
      }
      flush();
      if (this.chars > MAX_TERM_CHARS) {
        this.newLine();
        this.line.textContent = "[the view stops here; the full output is in the command's log]";
      }
    }
    // escapeEnd returns the index after the escape sequence at i, or -1 when
    // it continues in a later chunk.
    escapeEnd(s, i) {
      if (i + 1 >= s.length) return -1;
      const t = s[i + 1];
      if (t === "[") { // CSI: parameters, intermediates, a final byte
        for (let j = i + 2; j < s.length; j++) {
          const c = s.charCodeAt(j);
          if (c >= 0x40 && c <= 0x7e) return j + 1;
          if (c < 0x20) return j; // malformed: drop what came
        }
        return s.length - i > 64 ? s.length : -1;
      }
      if (t === "]" || t === "P" || t === "_" || t === "^" || t === "X") { // OSC, DCS...: to BEL or ST
        for (let j = i + 2; j < s.length; j++) {
          if (s[j] === "\x07") return j + 1;
          if (s[j] === "\x1b" && s[j + 1] === "\\") return j + 2;
        }
        return s.length - i > 4096 ? s.length : -1;
      }
      if (t === "(" || t === ")" || t === "#" || t === "%") return i + 3 <= s.length ? i + 3 : -1;
      return i + 2;
    }
    sgr(params) {
      const p = params === "" ? [0] : params.split(/[;:]/).map(x => parseInt(x || "0", 10));
      const st = this.st;
      for (let k = 0; k < p.length; k++) {
        const n = p[k];
        if (n === 0) { for (const key of Object.keys(st)) delete st[key]; }
        else if (n === 1) st.b = true;
        else if (n === 2) st.d = true;
        else if (n === 3) st.i = true;
        else if (n === 4) st.u = true;
        else if (n === 7) st.inv = true;
        else if (n === 22) { delete st.b; delete st.d; }
        else if (n === 23) delete st.i;
        else if (n === 24) delete st.u;
        else if (n === 27) delete st.inv;
        else if (n >= 30 && n <= 37) st.fg = n - 30;
        else if (n >= 90 && n <= 97) st.fg = n - 90 + 8;
        else if (n === 39) delete st.fg;
        else if (n >= 40 && n <= 47) st.bg = n - 40;
        else if (n >= 100 && n <= 107) st.bg = n - 100 + 8;
        else if (n === 49) delete st.bg;
        else if (n === 38 || n === 48) {
          const key = n === 38 ? "fg" : "bg";
          if (p[k + 1] === 5) { st[key] = color256(p[k + 2]); k += 2; }
          else if (p[k + 1] === 2) { st[key] = rgb(p[k + 2], p[k + 3], p[k + 4]); k += 4; }
        }
      }
    }
    span(text) {
      this.chars += text.length;
      const st = this.st;
      let fg = st.fg, bg = st.bg;
      if (st.inv) { [fg, bg] = [bg === undefined ? 0 : bg, fg === undefined ? 7 : fg]; }
      if (fg === undefined && bg === undefined && !st.b && !st.d && !st.i && !st.u) {
        this.line.appendChild(document.createTextNode(text));
        return;
      }
      const sp = el("span", "", text);
      const cls = [];
      if (typeof fg === "number") cls.push("fg" + fg); else if (fg) sp.style.color = fg;
      if (typeof bg === "number") cls.push("bg" + bg); else if (bg) sp.style.background = bg;
      for (const k of ["b", "d", "i", "u"]) if (st[k]) cls.push(k);
      sp.className = cls.join(" ");
      this.line.appendChild(sp);
    }
  }
  function clamp(n) { n = n | 0; return Math.max(0, Math.min(255, n)); }
  function rgb(r, g, b) { return "rgb(" + clamp(r) + "," + clamp(g) + "," + clamp(b) + ")"; }
  function color256(n) {
    n = clamp(n);
    if (n < 16) return n;
    if (n >= 232) { const v = 8 + (n - 232) * 10; return rgb(v, v, v); }
    n -= 16;
    const f = x => x === 0 ? 0 : 55 + x * 40;
    return rgb(f(Math.floor(n / 36)), f(Math.floor(n / 6) % 6), f(n % 6));
  }

  // Diffs: a unified diff shown unified or side by side.
  function parseDiff(text) {
    const rows = [];
    let o = 0, n = 0;
    for (const line of text.split("\n")) {
      if (line.startsWith("---") || line.startsWith("+++")) continue;
      const m = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(line);
      if (m) { o = +m[1]; n = +m[2]; rows.push({ k: "@", t: line }); continue; }
      if (line === "") continue;
      const k = line[0], t = line.slice(1);
      if (k === "-") rows.push({ k, t, o: o++ });
      else if (k === "+") rows.push({ k, t, n: n++ });
      else if (k === " ") rows.push({ k, t, o: o++, n: n++ });
      else if (k === "\\") rows.push({ k: "@", t: line });
    }
    return rows;
  }
  function td(cls, text) { return el("td", cls, text === undefined ? "" : text); }
  // cols fixes the columns' widths: a fixed table takes them from its first
  // row otherwise, a hunk header across every column.
  function cols(t, kinds) {
    const g = el("colgroup");
    for (const k of kinds) { const c = el("col"); if (k) c.style.width = k; g.appendChild(c); }
    t.appendChild(g);
  }
  function unifiedTable(rows) {
    const t = el("table", "diff unified");
    cols(t, ["3.5em", "3.5em", ""]);
    for (const r of rows) {
      const tr = el("tr", r.k === "@" ? "hunk" : "");
      if (r.k === "@") { tr.appendChild(td("ln")); tr.appendChild(td("ln")); const c = td("", r.t); tr.appendChild(c); }
      else {
        const cls = r.k === "+" ? "add" : r.k === "-" ? "del" : "";
        tr.appendChild(td("ln", r.o)); tr.appendChild(td("ln", r.n));
        tr.appendChild(td(cls, (r.k === " " ? " " : r.k) + r.t));
      }
      t.appendChild(tr);
    }
    return t;
  }
  function splitTable(rows) {
    const t = el("table", "diff split");
    cols(t, ["3.5em", "", "3.5em", ""]);
    const add = (l, r) => {
      const tr = el("tr");
      tr.appendChild(td("ln", l ? l.o : ""));
      tr.appendChild(td(l ? (l.k === "-" ? "del" : "") : "empty", l ? l.t : ""));
      tr.appendChild(td("ln", r ? r.n : ""));
      tr.appendChild(td(r ? (r.k === "+" ? "add" : "") : "empty", r ? r.t : ""));
      t.appendChild(tr);
    };
    for (let i = 0; i < rows.length;) {
      const r = rows[i];
      if (r.k === "@") {
        const tr = el("tr", "hunk"); const c = td("", r.t); c.colSpan = 4; tr.appendChild(c); t.appendChild(tr); i++; continue;
      }
      if (r.k === " ") { add(r, r); i++; continue; }
      const dels = [], adds = [];
      while (i < rows.length && rows[i].k === "-") dels.push(rows[i++]);
      while (i < rows.length && rows[i].k === "+") adds.push(rows[i++]);
      for (let j = 0; j < Math.max(dels.length, adds.length); j++) add(dels[j], adds[j]);
    }
    return t;
  }
  let diffMode = (typeof localStorage !== "undefined" && localStorage.getItem("corral.diff")) || "split";
  function diffView(text, truncated) {
    const box = el("div", "diffbox");
    const bar = el("div", "diffbar");
    const rows = parseDiff(text);
    const bUni = el("button", "", "unified"), bSplit = el("button", "", "side by side");
    bar.appendChild(bUni); bar.appendChild(bSplit);
    if (truncated) bar.appendChild(el("span", "muted", "(the diff was cut at 1 MB)"));
    const holder = el("div");
    const show = mode => {
      diffMode = mode;
      try { localStorage.setItem("corral.diff", mode); } catch (e) { /* a file:// report */ }
      holder.replaceChildren(mode === "split" ? splitTable(rows) : unifiedTable(rows));
      bUni.classList.toggle("on", mode !== "split");
      bSplit.classList.toggle("on", mode === "split");
    };
    bUni.onclick = () => show("unified");
    bSplit.onclick = () => show("split");
    box.appendChild(bar); box.appendChild(holder);
    show(diffMode);
    return box;
  }

  function verdictView(v, det) {
    const d = el("div", "verdict");
    d.appendChild(el("span", "badge " + v.decision, v.decision));
    d.appendChild(document.createTextNode(" " + (v.reason || "")));
    if (v.rule) { d.appendChild(document.createTextNode(" ")); d.appendChild(el("span", "rule", v.rule)); }
    if (v.part) { const p = el("div", "muted"); p.appendChild(document.createTextNode("part: ")); p.appendChild(el("code", "", v.part)); d.appendChild(p); }
    if (det && det.remembered) d.appendChild(el("div", "muted", "approved earlier in this session for these programs and arguments: not asked again"));
    if (det && det.answer) d.appendChild(el("div", "muted", "decision: " + det.answer.decision + (det.answer.by ? " (" + det.answer.by + ")" : "") + (det.answer.reason ? " — " + det.answer.reason : "")));
    if (det && det.rule_error) d.appendChild(el("div", "error-text", "the rule could not be added: " + det.rule_error));
    if (v.programs && v.programs.length) {
      const ul = el("ul");
      for (const p of v.programs) {
        const li = el("li");
        li.appendChild(el("span", "badge " + p.decision, p.decision));
        li.appendChild(document.createTextNode(" "));
        li.appendChild(el("code", "", [p.program].concat(p.args || []).join(" ")));
        if (!p.literal) li.appendChild(el("span", "muted", " (not literal)"));
        if (p.rule) li.appendChild(el("span", "rule", " " + p.rule));
        ul.appendChild(li);
      }
      d.appendChild(ul);
    }
    return d;
  }

  // visible shows the agent's text (a command, a path) with every control
  // and bidirectional formatting character escaped, as the terminal prompt
  // does, so that a command cannot read as another; newlines and tabs stay.
  function visible(s) {
    return String(s || "").replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ufeff]/g,
      c => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
  }

  function argSummary(tool, args) {
    if (!args) return "";
    if (tool === "bash") return visible(args.command);
    if (tool === "edit" || tool === "write" || tool === "read") {
      let s = visible(args.path);
      if (tool === "read" && (args.offset || args.limit)) s += " [" + (args.offset || 1) + (args.limit ? "+" + args.limit : "") + "]";
      return s;
    }
    return JSON.stringify(args);
  }

  // target is a network approval's host:port.
  function target(n) {
    return (n.host.indexOf(":") >= 0 ? "[" + n.host + "]" : n.host) + ":" + n.port;
  }

  // Timeline renders events into root.
  class Timeline {
    constructor(root, opts) {
      this.root = root;
      this.opts = opts || {};
      this.calls = new Map();
      this.approvals = new Map();
      this.pendingBox = this.opts.pendingBox || null;
      this.seen = -1;
    }
    add(seq, ev) {
      if (seq !== undefined && seq <= this.seen) return;
      if (seq !== undefined) this.seen = seq;
      switch (ev.type) {
        case "call_start": this.callStart(ev); break;
        case "output": this.output(ev); break;
        case "call_end": this.callEnd(ev); break;
        case "approval": this.approval(ev); break;
        case "approval_end": this.approvalEnd(ev); break;
        default: this.generic(ev);
      }
      if (this.opts.onEvent) this.opts.onEvent(ev);
    }
    call(id, tool) {
      let c = this.calls.get(id);
      if (c) return c;
      const card = el("div", "card call");
      card.dataset.call = id;
      const head = el("div", "head");
      const badge = el("span", "badge pending", "running");
      const toolEl = el("span", "tool", tool || "?");
      const what = el("span", "what");
      const time = el("span", "time");
      head.append(badge, toolEl, what, time);
      head.onclick = () => card.classList.toggle("collapsed");
      const body = el("div", "body");
      card.append(head, body);
      this.root.appendChild(card);
      c = { card, head, body, badge, what, time, tool };
      this.calls.set(id, c);
      return c;
    }
    callStart(ev) {
      const c = this.call(ev.call_id, ev.tool);
      c.start = ev.time;
      c.time.textContent = clock(ev.time);
      const args = ev.args || {};
      c.what.textContent = argSummary(ev.tool, args);
      c.what.title = c.what.textContent;
      if (ev.tool === "bash") {
        const pre = el("pre", "cmd", visible(args.command));
        c.body.appendChild(section("command" + (args.timeout ? " (timeout " + args.timeout + " s)" : ""), pre));
      } else if (ev.tool === "write") {
        c.body.appendChild(section("arguments", el("pre", "", JSON.stringify({ path: args.path, content: (args.content || "").length + " characters" }))));
      } else {
        c.body.appendChild(section("arguments", el("pre", "", JSON.stringify(args, null, 2))));
      }
    }
    terminal(c) {
      if (!c.term) {
        const box = el("div", "term");
        c.termSection = section("output", box);
        c.body.appendChild(c.termSection);
        c.term = new Terminal(box);
      }
      return c.term;
    }
    output(ev) {
      const c = this.call(ev.call_id, "bash");
      if (ev.dropped) { this.terminal(c).write("\n[" + ev.dropped + " bytes not kept by the view]\n"); return; }
      const term = this.terminal(c);
      const box = term.root;
      const atEnd = box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
      term.write(ev.data || "");
      if (atEnd) box.scrollTop = box.scrollHeight;
    }
    callEnd(ev) {
      const c = this.call(ev.call_id, ev.tool);
      const r = ev.result;
      const det = (r && r.details) || {};
      c.time.textContent = clock(c.start || ev.time) + (ev.duration_ns ? " · " + dur(ev.duration_ns) : "");
      let status = "ok", cls = "allow";
      if (ev.error) { status = "failed"; cls = "error"; }
      else if (r && r.is_error) {
        status = "error"; cls = "error";
        if (det.verdict && det.verdict.decision === "deny") { status = "denied"; cls = "deny"; }
        else if (det.verdict && det.verdict.decision === "confirm" && !det.ran) { status = "not approved"; cls = "confirm"; }
      } else if (ev.tool === "bash" && det.exit_code) { status = "exit " + det.exit_code; cls = "confirm"; }
      c.badge.className = "badge " + cls;
      c.badge.textContent = status;
      c.card.classList.add("ended", "status-" + status.replace(/ /g, "-"));
      if (det.verdict) c.body.insertBefore(section("policy", verdictView(det.verdict, det)), c.body.children[1] || null);
      if ((ev.tool === "edit" || ev.tool === "write") && det.diff) {
        const label = (det.path || "") + "  +" + (det.added || 0) + " −" + (det.removed || 0) + (det.created ? " (created)" : "");
        c.body.appendChild(section("diff " + label, diffView(det.diff, det.diff_truncated)));
      }
      if (ev.error) c.body.appendChild(section("failure", el("pre", "error-text", ev.error)));
      if (r) {
        const pre = el("pre", "result" + (r.is_error ? " error" : ""), r.content);
        c.body.appendChild(section("result for the model", pre));
      }
      if (this.opts.collapseEnded && !(r && r.is_error) && ev.tool === "read") c.card.classList.add("collapsed");
    }
    approval(ev) {
      const a = ev.approval;
      if (!a) return;
      const box = el("div", "approval");
      box.dataset.approval = a.id;
      const net = a.network;
      box.appendChild(el("strong", "", net ? "Network access needed" : "Approval needed"));
      if (a.deadline) box.appendChild(el("span", "muted", " — denied unless answered by " + clock(a.deadline)));
      if (net) {
        box.appendChild(el("div", "host", "a command wants to reach " + target(net) + ", which no network list allows"));
        box.appendChild(el("div", "muted", a.command ? "while this command ran:" : "no command was running: a background process"));
      }
      if (a.command) box.appendChild(el("div", "cmd", visible(a.command)));
      if (a.cwd) box.appendChild(el("div", "muted", "in " + visible(a.cwd)));
      if (!net) box.appendChild(verdictView(a.verdict || {}));
      if (a.ask && a.ask.length) {
        box.appendChild(el("div", "", "needs approval:"));
        const ul = el("ul");
        for (const p of a.ask) ul.appendChild(el("li", "mono", visible([p.program].concat(p.args || []).join(" ")) + (p.literal ? "" : "  (not literal: never remembered)")));
        box.appendChild(ul);
      }
      if (a.amendment && a.amendment.length) {
        box.appendChild(el("div", "", "rule it would add to the policy file:"));
        const ul = el("ul");
        for (const p of a.amendment) ul.appendChild(el("li", "mono", net ? "[network] allow " + JSON.stringify(p) : "allow " + visible(p)));
        box.appendChild(ul);
      }
      if (a.no_rule) box.appendChild(el("div", "muted", a.no_rule));
      const actions = el("div", "actions");
      const status = el("span", "muted");
      if (this.opts.answer) {
        const reason = el("input");
        reason.placeholder = "reason for the agent (optional)";
        reason.name = "reason";
        for (const choice of a.choices || []) {
          const b = el("button", choice, choice);
          b.dataset.decision = choice;
          b.onclick = () => {
            status.textContent = "sending…";
            this.opts.answer(a.id, choice, reason.value).then(msg => { status.textContent = msg || ""; });
          };
          actions.appendChild(b);
        }
        actions.appendChild(reason);
      }
      actions.appendChild(status);
      box.appendChild(actions);
      this.approvals.set(a.id, { box, actions });
      const c = ev.call_id && this.calls.get(ev.call_id);
      if (c) c.body.appendChild(box);
      else this.root.appendChild(box);
      if (c) { c.badge.className = "badge pending"; c.badge.textContent = "waiting for approval"; }
      if (this.pendingBox) this.pendingBox.update();
    }
    approvalEnd(ev) {
      const id = ev.approval && ev.approval.id;
      const p = this.approvals.get(id);
      if (!p) return;
      p.box.classList.add("done");
      const ans = ev.answer || {};
      p.actions.replaceChildren(el("span", "", "decided: " + ans.decision + (ans.by ? " (" + ans.by + ")" : "") + (ans.reason ? " — " + ans.reason : "")));
      const c = ev.call_id && this.calls.get(ev.call_id);
      if (c && !c.card.classList.contains("ended")) { c.badge.className = "badge pending"; c.badge.textContent = "running"; }
      if (this.pendingBox) this.pendingBox.update();
    }
    generic(ev) {
      const box = el("div", "event " + ev.type);
      box.appendChild(el("span", "type", ev.type));
      box.appendChild(el("span", "muted", clock(ev.time) + " "));
      const rest = {};
      for (const [k, v] of Object.entries(ev)) if (k !== "type" && k !== "time" && k !== "session") rest[k] = v;
      box.appendChild(el("code", "", JSON.stringify(rest)));
      const c = ev.call_id && this.calls.get(ev.call_id);
      (c ? c.body : this.root).appendChild(box);
    }
    pending() {
      let n = 0;
      for (const p of this.approvals.values()) if (!p.box.classList.contains("done")) n++;
      return n;
    }
  }

  function summaryTable(sum) {
    const t = el("table", "list summary");
    const row = (k, v) => { const tr = el("tr"); tr.appendChild(el("th", "", k)); tr.appendChild(el("td", "num", v)); t.appendChild(tr); };
    row("calls", sum.calls + " (" + Object.entries(sum.by_tool || {}).map(([k, v]) => k + " " + v).join(", ") + ")");
    row("errors", sum.errors);
    row("denials", sum.denials);
    row("approvals", sum.approvals + (Object.keys(sum.decisions || {}).length ? " (" + Object.entries(sum.decisions).map(([k, v]) => k + " " + v).join(", ") + ")" : "") + (sum.remembered ? ", " + sum.remembered + " remembered" : ""));
    row("time in bash", dur(sum.bash_time_ns) || "0");
    row("files changed", (sum.files || []).length);
    return t;
  }

  window.corral = { Timeline, Terminal, summaryTable, el, dur, clock, parseDiff };
})();
