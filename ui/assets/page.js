// The live pages: the list of sessions, and one session's timeline fed by
// server-sent events.
"use strict";

(function () {
  const { Timeline, summaryTable, el, clock } = window.corral;
  const body = document.body;
  const readOnly = body.dataset.readonly === "true";
  const status = document.getElementById("status");

  async function answer(id, decision, reason) {
    try {
      const r = await fetch("/api/approvals/" + encodeURIComponent(id), {
        method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ decision, reason }),
      });
      const j = await r.json().catch(() => ({}));
      return r.ok ? "" : (j.error || r.statusText);
    } catch (e) {
      return String(e);
    }
  }

  if (body.dataset.page === "session") {
    const id = body.dataset.session;
    const sumBox = document.getElementById("summary");
    let sumTimer = null;
    const refreshSummary = () => {
      clearTimeout(sumTimer);
      sumTimer = setTimeout(async () => {
        const r = await fetch("/api/sessions/" + encodeURIComponent(id) + "/summary");
        if (r.ok) sumBox.replaceChildren(summaryTable(await r.json()));
      }, 300);
    };
    const tl = new Timeline(document.getElementById("timeline"), {
      answer: readOnly ? null : answer,
      onEvent: ev => { if (ev.type === "call_end" || ev.type === "approval_end") refreshSummary(); },
    });
    refreshSummary();
    const es = new EventSource("/api/sessions/" + encodeURIComponent(id) + "/events");
    es.onopen = () => { status.textContent = "live"; };
    es.onmessage = m => { tl.add(parseInt(m.lastEventId, 10), JSON.parse(m.data)); };
    es.addEventListener("end", () => { status.textContent = "finished"; es.close(); refreshSummary(); });
    es.onerror = () => { if (es.readyState !== EventSource.CLOSED) status.textContent = "reconnecting…"; };
  }

  if (body.dataset.page === "index") {
    const tbody = document.querySelector("#sessions tbody");
    const pendingBox = document.getElementById("pending");
    const refresh = async () => {
      try {
        const [ss, ps] = await Promise.all([fetch("/api/sessions").then(r => r.json()), fetch("/api/approvals").then(r => r.json())]);
        tbody.replaceChildren(...ss.map(s => {
          const tr = el("tr");
          const a = el("a", "", s.title ? s.id + " — " + s.title : s.id);
          a.href = "/sessions/" + encodeURIComponent(s.id);
          const c = el("td"); c.appendChild(a); tr.appendChild(c);
          const st = el("td"); st.appendChild(el("span", "badge " + (s.live ? "live" : ""), s.live ? "live" : "finished")); tr.appendChild(st);
          tr.appendChild(el("td", "", s.started ? new Date(s.started).toLocaleString() : ""));
          tr.appendChild(el("td", "num", s.calls));
          tr.appendChild(el("td", "num", s.errors));
          tr.appendChild(el("td", "num", s.pending || ""));
          tr.appendChild(el("td", "", clock(s.last)));
          return tr;
        }));
        if (!ps.length) pendingBox.replaceChildren(el("p", "muted", "none"));
        else pendingBox.replaceChildren(...ps.map(p => {
          const d = el("div", "approval");
          const a = el("a", "", "session " + p.session);
          a.href = "/sessions/" + encodeURIComponent(p.session);
          if (p.network) d.append(a, el("div", "host", "reach " + p.network.host + ":" + p.network.port), el("div", "cmd", p.command || "(a background process)"));
          else d.append(a, el("div", "cmd", p.command), el("div", "muted", (p.verdict && p.verdict.reason) || ""));
          return d;
        }));
        status.textContent = "updated " + new Date().toLocaleTimeString();
      } catch (e) {
        status.textContent = "cannot reach corral: " + e;
      }
    };
    refresh();
    setInterval(refresh, 2000);
  }
})();
