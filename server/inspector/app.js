// The Loom inspector. Every text that comes from the API is put in the page with textContent, never
// parsed as HTML: a session's messages and ids are untrusted. The API key lives in sessionStorage (this tab
// only) and goes to this server alone.
"use strict";

(function () {
  const KEY = "loom.inspector.key";
  const SESSION = "loom.inspector.session";
  const SESSIONS_LISTED = 50; // the picker's length: GET /v1/assemblies's default limit
  const REGIONS = ["instructions", "tools", "memory", "summary", "knowledge", "history", "tool_outputs", "message"];
  const $ = (id) => document.getElementById(id);
  let current = null; // the record shown
  let list = []; // the session's summaries, newest first

  function el(tag, opts, ...children) {
    const e = document.createElement(tag);
    if (opts) {
      if (opts.cls) e.className = opts.cls;
      if (opts.text !== undefined) e.textContent = String(opts.text);
      if (opts.title) e.title = String(opts.title);
    }
    for (const c of children) if (c) e.appendChild(c);
    return e;
  }

  function status(text, isError) {
    const s = $("status");
    s.textContent = text || "";
    s.className = isError ? "error" : "muted";
  }

  function regionClass(name) {
    return "r-" + (REGIONS.includes(name) ? name : "other");
  }

  async function api(method, path, body) {
    const headers = {};
    const key = sessionStorage.getItem(KEY);
    if (key) headers["Authorization"] = "Bearer " + key;
    const init = { method, headers, credentials: "omit", cache: "no-store" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const resp = await fetch(path, init);
    let data = null;
    try { data = await resp.json(); } catch (e) { data = null; }
    if (!resp.ok) {
      const msg = data && data.error ? data.error.message : resp.status + " " + resp.statusText;
      throw new Error(msg);
    }
    return data;
  }

  function showKeyState() {
    $("key-state").textContent = sessionStorage.getItem(KEY) ? "a key is set for this tab" : "no key (keyless server)";
  }

  // when is a record's time, as the time of day when it is today's.
  function when(t) {
    const d = new Date(t);
    return d.toDateString() === new Date().toDateString() ? d.toLocaleTimeString() : d.toLocaleString();
  }

  // listSessions fills the session picker from GET /v1/assemblies: the tenant's sessions that have
  // recorded assemblies, the most recently recorded first.
  async function listSessions() {
    const pick = $("session-pick");
    const state = $("pick-state");
    state.textContent = "listing sessions…";
    let data;
    try {
      data = await api("GET", "/v1/assemblies?limit=" + SESSIONS_LISTED);
    } catch (e) {
      state.textContent = "cannot list the sessions: " + e.message;
      return;
    }
    const sessions = data.sessions || [];
    const chosen = sessionStorage.getItem(SESSION) || "";
    const first = el("option", { text: sessions.length ? "choose a session…" : "no session has recorded assemblies" });
    first.value = "";
    pick.replaceChildren(first);
    for (const s of sessions) {
      const o = el("option", { text: s.session + " · " + s.assemblies + (s.assemblies === 1 ? " assembly" : " assemblies") +
        " · last " + when(s.last_time), title: "newest record #" + s.last_seq });
      o.value = s.session;
      pick.appendChild(o);
    }
    pick.value = sessions.some((s) => s.session === chosen) ? chosen : "";
    state.textContent = sessions.length === SESSIONS_LISTED ? "the " + SESSIONS_LISTED + " most recent" : "";
    if (!data.recording) state.textContent = "this server does not record assemblies (loom serve --record-assemblies)";
  }

  async function loadSession(session) {
    sessionStorage.setItem(SESSION, session);
    $("session").value = session;
    const pick = $("session-pick");
    pick.value = [...pick.options].some((o) => o.value === session) ? session : "";
    status("loading " + session + "…");
    $("detail").hidden = true;
    const tl = $("timeline");
    tl.replaceChildren();
    try {
      const data = await api("GET", "/v1/sessions/" + encodeURIComponent(session) + "/assemblies");
      list = data.assemblies || [];
      if (list.length === 0) {
        status(data.recording ? "no recorded assemblies for this session yet" : "this server does not record assemblies (loom serve --record-assemblies)");
        return;
      }
      status(list.length + " recent assemblies");
      list.forEach((a, i) => {
        const older = list[i + 1];
        const dropped = a.regions.reduce((n, r) => n + r.dropped, 0);
        const b = el("button", { title: "assembly " + a.seq });
        b.type = "button";
        b.dataset.seq = String(a.seq);
        b.appendChild(el("strong", { text: "#" + a.seq }));
        b.appendChild(document.createTextNode(" " + new Date(a.time).toLocaleTimeString()));
        if (older && older.prefix_hash !== a.prefix_hash) b.appendChild(el("span", { cls: "flag", text: "prefix changed" }));
        if (a.summary) b.appendChild(el("span", { cls: "flag", text: "summary" }));
        b.appendChild(el("span", { cls: "line2", text: a.total_tokens + " / " + a.budget + " tokens · " + a.model + " · " + a.format + " · " + dropped + " dropped" }));
        b.addEventListener("click", () => showAssembly(session, a.seq));
        tl.appendChild(el("li", null, b));
      });
      await showAssembly(session, list[0].seq);
    } catch (e) {
      status(e.message, true);
    }
  }

  async function showAssembly(session, seq) {
    for (const b of $("timeline").querySelectorAll("button")) b.classList.toggle("selected", b.dataset.seq === String(seq));
    try {
      current = await api("GET", "/v1/sessions/" + encodeURIComponent(session) + "/assemblies/" + seq);
    } catch (e) {
      status(e.message, true);
      return;
    }
    render(current);
  }

  function render(rec) {
    const res = rec.result;
    $("detail").hidden = false;
    $("detail-title").textContent = "Assembly #" + rec.seq + " of " + rec.request.session;
    const facts = [new Date(rec.time).toLocaleString(), res.model, res.format, res.encoding,
      res.total_tokens + " of " + res.budget + " tokens", rec.window ? "window " + rec.window : "window unknown",
      res.exact ? "exact" : "estimated"];
    if (rec.request.message) facts.push("message: " + rec.request.message);
    $("detail-facts").textContent = facts.join(" · ");
    renderBar(rec);
    renderRegions(res);
    renderCache(rec);
    renderSummary(res);
    renderMessages(rec);
    $("try-budget").value = String(res.budget);
    $("try-format").value = res.format;
    $("try-result").replaceChildren();
  }

  function renderBar(rec) {
    const res = rec.result;
    // The stacked bar is the budget; the thin bar under it, the model's window.
    const scale = Math.max(res.budget, res.total_tokens, 1);
    const bar = $("bar");
    bar.replaceChildren();
    const legend = $("legend");
    legend.replaceChildren();
    for (const r of res.report.regions) {
      if (r.used === 0 && r.budget === 0) continue;
      const seg = el("div", { cls: "seg " + regionClass(r.name), title: r.name + ": " + r.used + " tokens (budget " + r.budget + ")" });
      seg.style.width = (100 * r.used / scale) + "%";
      bar.appendChild(seg);
      legend.appendChild(el("li", null, el("span", { cls: "swatch " + regionClass(r.name) }), document.createTextNode(r.name + " " + r.used)));
    }
    const overhead = res.total_tokens - res.report.regions.reduce((n, r) => n + r.used, 0);
    if (overhead > 0) {
      const seg = el("div", { cls: "seg r-other", title: "format overhead: " + overhead + " tokens" });
      seg.style.width = (100 * overhead / scale) + "%";
      bar.appendChild(seg);
      legend.appendChild(el("li", null, el("span", { cls: "swatch r-other" }), document.createTextNode("overhead " + overhead)));
    }
    $("bar-scale").textContent = "the budget, " + res.budget + " tokens: used " + res.total_tokens + " (" +
      (100 * res.total_tokens / scale).toFixed(1) + "%), " + Math.max(res.budget - res.total_tokens, 0) + " left";
    const wrap = $("window-wrap");
    wrap.hidden = !rec.window;
    if (rec.window) {
      $("window-used").style.width = Math.min(100, 100 * res.total_tokens / rec.window) + "%";
      $("window-budget").style.left = Math.min(100, 100 * res.budget / rec.window) + "%";
      $("window-scale").textContent = "the model's window, " + rec.window + " tokens: the prompt takes " +
        (100 * res.total_tokens / rec.window).toFixed(2) + "%, the budget (dashed) " + (100 * res.budget / rec.window).toFixed(2) + "%";
    }
  }

  function renderRegions(res) {
    const box = $("regions");
    box.replaceChildren();
    for (const r of res.report.regions) {
      const div = el("div", { cls: "region" });
      div.dataset.region = r.name;
      div.appendChild(el("h4", null, el("span", { cls: "swatch " + regionClass(r.name) }),
        document.createTextNode(r.name + " — used " + r.used + " of " + r.budget + (r.exact ? "" : " (estimated)") +
          " · " + r.included.length + " kept, " + r.dropped.length + " dropped")));
      if (r.included.length + r.dropped.length > 0) {
        const t = el("table", null, el("tr", null, el("th", { text: "item" }), el("th", { cls: "tokens", text: "tokens" }),
          el("th", { text: "" }), el("th", { text: "reason" })));
        const counts = Array.isArray(r.included_tokens) ? r.included_tokens : [];
        r.included.forEach((id, i) => t.appendChild(el("tr", { cls: "kept-item" }, el("td", { text: id }), tokensCell(counts[i]),
          el("td", { cls: "kept", text: "kept" }), el("td"))));
        for (const d of r.dropped) {
          const tr = el("tr", { cls: "dropped-item" }, el("td", { text: d.id }), tokensCell(d.tokens),
            el("td", { cls: "dropped", text: "dropped" }), el("td", { text: d.reason }));
          t.appendChild(tr);
        }
        div.appendChild(t);
      }
      box.appendChild(div);
    }
  }

  // tokensCell shows one item's tokens: a count, "?" when the assembly did not count it (-1), nothing
  // when the record predates per-item counts.
  function tokensCell(n) {
    if (typeof n !== "number") return el("td", { cls: "tokens", title: "not in this record" });
    if (n < 0) return el("td", { cls: "tokens", text: "?", title: "not counted" });
    return el("td", { cls: "tokens", text: n });
  }

  function dl(box, pairs) {
    box.replaceChildren();
    for (const [k, v] of pairs) {
      box.appendChild(el("dt", { text: k }));
      box.appendChild(el("dd", { text: v }));
    }
  }

  function renderCache(rec) {
    const res = rec.result;
    const i = list.findIndex((a) => a.seq === rec.seq);
    const older = i >= 0 ? list[i + 1] : undefined;
    const pairs = [["prefix hash", res.prefix_hash || "—"]];
    if (res.prompt_cache_key) pairs.push(["prompt_cache_key", res.prompt_cache_key]);
    const stable = res.report.regions.filter((r) => ["instructions", "tools"].includes(r.name)).reduce((n, r) => n + r.used, 0);
    pairs.push(["cacheable prefix", "instructions and tools, " + stable + " tokens, then pinned memory"]);
    if (older) {
      pairs.push(["since #" + older.seq, older.prefix_hash === res.prefix_hash ? "the same prefix: a provider's prompt cache can reuse it" :
        "the prefix changed (tools, instructions or pinned memory differ): the cache broke here"]);
    }
    // The assembly's cache report: what its prompt shared with the session's previous one, and what changed.
    const c = res.cache;
    if (c) {
      pairs.push(["shared with the previous assembly", c.shared_tokens + " tokens from the start"]);
      if (c.reason === "first_assembly") pairs.push(["cache break", "the session's first assembly: nothing to share yet"]);
      else if (c.reason) pairs.push(["cache break", (c.region ? c.region + ": " : "") + c.reason.replace(/_/g, " ")]);
      else pairs.push(["cache break", "none: the previous assembly's tools, instructions, memory, summary and history start this one"]);
    }
    dl($("cache"), pairs);
  }

  function renderSummary(res) {
    const box = $("summary");
    box.replaceChildren();
    const s = res.report.summary;
    if (!s) {
      box.appendChild(el("p", { cls: "muted", text: "no compaction summary in this assembly" }));
      return;
    }
    box.appendChild(el("p", { text: "A summary stood for " + s.covers + " history messages, seq " + (s.from || "?") + " to " + (s.to || "?") + "." }));
    const hist = res.report.regions.find((r) => r.name === "history");
    if (hist) {
      const n = hist.dropped.filter((d) => d.reason === "summarized").length;
      box.appendChild(el("p", { cls: "muted", text: n + " history messages reported as summarized" }));
    }
    const text = findSummaryText(res);
    if (text) box.appendChild(el("pre", { text }));
  }

  function findSummaryText(res) {
    for (const m of res.messages || []) {
      const t = typeof m.content === "string" ? m.content : "";
      const at = t.indexOf("<conversation_summary");
      const end = at >= 0 ? t.indexOf("</conversation_summary>", at) : -1;
      if (end >= 0) return t.slice(at, end + "</conversation_summary>".length);
    }
    return "";
  }

  function messageText(m) {
    if (typeof m.content === "string") return m.content;
    if (Array.isArray(m.content)) return m.content.map((b) => b.text || b.content || (b.type === "tool_use" ? "tool_use " + b.name + " " + JSON.stringify(b.input) : "[" + b.type + "]")).join("\n");
    if (Array.isArray(m.parts)) return m.parts.map((p) => p.text || JSON.stringify(p)).join("\n");
    return JSON.stringify(m);
  }

  function renderMessages(rec) {
    const res = rec.result;
    const box = $("messages");
    box.replaceChildren();
    if (rec.output_omitted) {
      box.appendChild(el("p", { cls: "muted", text: "the rendered output did not fit the record's bound and was not kept (loom serve --assembly-max-bytes)" }));
      return;
    }
    const add = (role, text) => box.appendChild(el("div", { cls: "msg" }, el("div", { cls: "role", text: role }), el("pre", { text })));
    if (res.system) add("system (top level)", res.system);
    if (res.instructions) add("instructions", res.instructions);
    if (res.system_instruction) add("system_instruction", messageText(res.system_instruction));
    for (const m of res.messages || []) {
      let text = messageText(m);
      if (m.tool_calls) text += (text ? "\n" : "") + m.tool_calls.map((c) => "→ " + c.function.name + "(" + c.function.arguments + ")").join("\n");
      add(m.role + (m.tool_call_id ? " (" + m.tool_call_id + ")" : ""), text);
    }
    for (const it of res.input || []) add(it.role || it.type, messageText(it));
    for (const c of res.contents || []) add(c.role, messageText(c));
    if (res.text) add("text", res.text);
  }

  async function tryIt(ev) {
    ev.preventDefault();
    if (!current) return;
    const q = current.request;
    const body = { session: q.session, message: q.message || "", model: current.result.model,
      max_tokens: Number($("try-budget").value), format: $("try-format").value, no_record: true, count_dropped: true };
    if (q.agent) body.agent = q.agent;
    if (q.user) body.user = q.user;
    if (q.preset) body.preset = q.preset;
    if (q.history_limit) body.history_limit = q.history_limit;
    const box = $("try-result");
    box.replaceChildren(el("p", { cls: "muted", text: "running…" }));
    let got;
    try {
      got = await api("POST", "/v1/assemble", body);
    } catch (e) {
      box.replaceChildren(el("p", { cls: "up", text: e.message }));
      return;
    }
    const was = current.result;
    const t = el("table", null, el("tr", null, el("th", { text: "" }), el("th", { text: "recorded" }), el("th", { text: "try" }), el("th", { text: "change" })));
    const row = (name, a, b) => {
      const d = b - a;
      t.appendChild(el("tr", null, el("td", { text: name }), el("td", { text: a }), el("td", { text: b }),
        el("td", { cls: d > 0 ? "up" : d < 0 ? "down" : "", text: d === 0 ? "=" : (d > 0 ? "+" : "") + d })));
    };
    row("budget", was.budget, got.budget);
    row("total tokens", was.total_tokens, got.total_tokens);
    const names = new Set([...was.report.regions.map((r) => r.name), ...got.report.regions.map((r) => r.name)]);
    for (const n of names) {
      const a = was.report.regions.find((r) => r.name === n) || { used: 0, dropped: [] };
      const b = got.report.regions.find((r) => r.name === n) || { used: 0, dropped: [] };
      row(n + " used", a.used, b.used);
      row(n + " dropped", a.dropped.length, b.dropped.length);
    }
    const facts = el("p", { cls: "muted", text: "format " + was.format + " → " + got.format + "; prefix " +
      (was.prefix_hash === got.prefix_hash ? "unchanged" : "changed") + "; " + (got.messages ? got.messages.length + " messages" : "") });
    box.replaceChildren(facts, t);
    const moved = movedItems(was, got);
    if (moved.length > 0) {
      const m = el("table", { cls: "moved" }, el("tr", null, el("th", { text: "region" }), el("th", { text: "item" }),
        el("th", { cls: "tokens", text: "tokens" }), el("th", { text: "recorded → try" })));
      for (const it of moved) {
        m.appendChild(el("tr", null, el("td", { text: it.region }), el("td", { text: it.id }), tokensCell(it.tokens),
          el("td", { cls: it.kept ? "kept" : "dropped", text: it.kept ? "dropped → kept" : "kept → dropped" + (it.reason ? " (" + it.reason + ")" : "") })));
      }
      box.appendChild(m);
    }
  }

  // movedItems lists the items kept in one of two results and dropped in the other, each with its tokens
  // as the result that kept it (or, dropped, counted it) says.
  function movedItems(was, got) {
    const out = [];
    for (const b of got.report.regions) {
      const a = was.report.regions.find((r) => r.name === b.name);
      if (!a) continue;
      const keptA = new Set(a.included), keptB = new Set(b.included);
      b.included.forEach((id, i) => {
        if (!keptA.has(id) && a.dropped.some((d) => d.id === id)) out.push({ region: b.name, id, kept: true, tokens: (b.included_tokens || [])[i] });
      });
      for (const d of b.dropped) {
        if (keptA.has(d.id) && !keptB.has(d.id)) out.push({ region: b.name, id: d.id, kept: false, tokens: d.tokens, reason: d.reason });
      }
    }
    return out;
  }

  document.addEventListener("DOMContentLoaded", () => {
    showKeyState();
    $("key-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      const k = $("key").value.trim();
      if (k) sessionStorage.setItem(KEY, k); else sessionStorage.removeItem(KEY);
      $("key").value = "";
      showKeyState();
      listSessions();
    });
    $("forget-key").addEventListener("click", () => { sessionStorage.removeItem(KEY); showKeyState(); });
    $("session-pick").addEventListener("change", () => {
      const s = $("session-pick").value;
      if (s) loadSession(s);
    });
    $("list-sessions").addEventListener("click", listSessions);
    $("session-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      const s = $("session").value.trim();
      if (s) loadSession(s);
    });
    $("try-form").addEventListener("submit", tryIt);
    // Listed at once when the tab has a key; without one (a keyless server), "Use key" or ↻ lists them.
    if (sessionStorage.getItem(KEY)) listSessions();
    const params = new URLSearchParams(location.search);
    const s = params.get("session") || sessionStorage.getItem(SESSION);
    if (s) {
      $("session").value = s;
      loadSession(s);
    }
  });
})();
