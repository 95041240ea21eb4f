// Sluice dashboard: an operator's console in plain JavaScript, no build step.
//
// Third-party: uPlot 1.6.32 (https://github.com/leeoniya/uPlot), MIT
// licence (see LICENSE.uPlot beside this file), committed as
// uPlot.iife.min.js and uPlot.min.css from the npm package's dist/.
//
// Reads the REST API with the token kept in sessionStorage (every request
// sends "Authorization: Bearer TOKEN") and follows the server-sent event
// stream /v1/events with fetch() (EventSource cannot send headers). The
// charts come from the servers' history in the store (/v1/history), so
// they survive a reload and show what happened before the page was
// opened; they are read again every few samples. Events update the jobs
// and refresh the endpoints' live figures.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const st = {
    token: sessionStorage.getItem("sluice.token") || "",
    me: null,
    jobs: new Map(), // id -> JobOut
    endpoints: new Map(), // name -> EndpointOut
    hist: null, // HistoryOut of the filters' range
    charts: new Map(), // key -> uPlot
    detail: null, // {job, files, from}
    view: "overview",
    abort: null,
    synthetic: false,
    status: null, // StatusOut: scheduler, cycle, queues by class
    page: "", // the job page shown: "ID/FROM"
    focus: null, // the link or endpoint of the detail view: {src, dst} or {ep}
    failures: [], // FailureOut, newest first
    failOlder: false,
    users: new Set(), // user and VO names seen, for the filters' suggestions
    vos: new Set(),
    estimated: "", // the submit form's text its estimates were made for
    firstSample: 0, // ms: the servers' first sample, once a range began before it
  };

  // ---- formatting ----
  const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  // One unit system on every screen: decimal (kB, MB, GB), as the charts.
  function bytes(n) {
    if (n == null || n < 0) return "?";
    const u = ["B", "kB", "MB", "GB", "TB", "PB"];
    let i = 0;
    while (n >= 1000 && i < u.length - 1) { n /= 1000; i++; }
    return (i ? n.toFixed(n < 10 ? 2 : 1) : n) + " " + u[i];
  }
  const rate = (b) => (b > 0 ? bytes(b) + "/s" : "–");
  function dur(s) {
    if (!(s > 0)) return "–";
    if (s < 1) return "< 1 s";
    s = Math.round(s);
    if (s < 60) return s + " s";
    if (s < 3600) return Math.floor(s / 60) + " min " + (s % 60) + " s";
    return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
  }
  const when = (t) => (t ? new Date(t).toLocaleString() : "–");
  const pct = (a, b) => (b > 0 ? Math.min(100, (100 * a) / b) : 0);
  function progress(done, total, label) {
    const p = pct(done, total);
    return `<progress max="100" value="${p.toFixed(1)}" aria-label="${esc(label)}"></progress> ${p.toFixed(0)}%`;
  }
  // num shows a count, or an average of counts to one decimal.
  const num = (x) => (x == null ? "–" : Number.isInteger(x) ? String(x) : Number(x).toFixed(1));
  // The last bucket that has a value (the newest sample), or null.
  function last(vals) {
    for (let i = (vals || []).length - 1; i >= 0; i--) if (vals[i] != null) return vals[i];
    return null;
  }
  // parseSize reads "2GB", "500 MiB", "1e9" (bytes); NaN if unreadable.
  function parseSize(s) {
    const m = /^([0-9]+(?:\.[0-9]+)?(?:e[0-9]+)?)\s*([kmgtp]?)(i?)b?$/i.exec(String(s).trim());
    if (!m) return NaN;
    const pow = " kmgtp".indexOf(m[2].toLowerCase() || " ");
    return Math.round(parseFloat(m[1]) * Math.pow(m[3] ? 1024 : 1000, pow));
  }

  // ---- API ----
  async function api(path, opts = {}) {
    // A call made for a session that has ended (a timer of the last
    // user's, say) must neither run nor sign the next user out.
    const token = st.token;
    if (!token) throw new Error("unauthorized");
    const r = await fetch(path, { ...opts, headers: { Authorization: "Bearer " + token, Accept: "application/json", ...(opts.headers || {}) } });
    if (r.status === 401) {
      if (token === st.token) logout("Your token was refused; sign in again.");
      throw new Error("unauthorized");
    }
    if (token !== st.token) throw new Error("unauthorized"); // signed out meanwhile: drop the answer
    const text = await r.text();
    const body = text ? JSON.parse(text) : null;
    if (!r.ok) throw new Error((body && (body.detail || body.title)) || r.statusText);
    return body;
  }
  function showError(e) {
    if (e && e.message !== "unauthorized") $("error").textContent = String(e.message || e);
  }
  // The filters' query parameters: an admin's user and VO.
  function scope() {
    const q = [];
    if (st.me && st.me.admin) {
      const u = $("f-user").value.trim(), v = $("f-vo").value.trim();
      if (u) q.push("user=" + encodeURIComponent(u));
      if (v) q.push("vo=" + encodeURIComponent(v));
    }
    return q.join("&");
  }
  const search = () => $("f-q").value.trim();
  const withQ = () => [scope(), search() ? "q=" + encodeURIComponent(search()) : ""].filter(Boolean).join("&");

  // ---- session ----
  async function login(token) {
    st.token = token;
    try {
      st.me = await api("/v1/whoami");
    } catch (e) {
      st.token = "";
      sessionStorage.removeItem("sluice.token");
      $("login-error").textContent = e.message === "unauthorized" ? "That token was refused." : "Sign-in failed: " + e.message;
      return;
    }
    sessionStorage.setItem("sluice.token", token);
    $("login-error").textContent = "";
    $("login").hidden = true;
    $("nav").hidden = false;
    $("session").hidden = false;
    $("filters").hidden = false;
    $("f-admin").hidden = !st.me.admin;
    $("who").textContent = `${st.me.name} (${st.me.vo}${st.me.admin ? ", admin" : ""})`;
    await Promise.all([loadJobs(), loadEndpoints(), loadHistory()]).catch(showError);
    connect();
    route();
  }
  function logout(msg) {
    if (st.abort) st.abort.abort();
    st.abort = null;
    clearTimeout(epTimer);
    clearTimeout(filesTimer);
    clearTimeout(histTimer);
    epTimer = filesTimer = histTimer = null;
    st.token = "";
    st.me = null;
    st.jobs.clear();
    st.endpoints.clear();
    st.hist = null;
    for (const c of st.charts.values()) c.destroy();
    st.charts.clear();
    st.detail = null;
    st.page = "";
    st.synthetic = false;
    st.failures = [];
    st.users.clear();
    st.vos.clear();
    live(false);
    sessionStorage.removeItem("sluice.token");
    for (const id of ["endpoints", "jobs", "running", "job-detail", "allocations", "links", "failures", "eps-table", "detail-links", "detail-failures", "s-estimates"]) $(id).textContent = "";
    for (const v of document.querySelectorAll(".view")) v.hidden = true;
    $("nav").hidden = true;
    $("session").hidden = true;
    $("filters").hidden = true;
    $("login").hidden = false;
    $("login-error").textContent = msg || "";
    $("token").value = "";
    $("token").focus();
  }

  // ---- data ----
  // The jobs table holds the newest jobsPage jobs (of the state and
  // filters chosen) and asks for the next older page when the user wants
  // it: one request of every job a user ever ran would grow without
  // bound. jobsPage is a variable so that tests can page a handful of jobs.
  let jobsPage = 500;
  // jobsGen counts the table's reloads: a job read while the table was
  // reloaded (a filter applied, say) is put in only if it still belongs.
  let jobsGen = 0;
  function jobsQuery(before) {
    const state = $("job-state").value;
    return `/v1/jobs?limit=${jobsPage}` + (before ? "&before=" + before : "") + (state ? "&state=" + state : "") + (withQ() ? "&" + withQ() : "");
  }
  function remember(owner, vo) {
    if (owner) st.users.add(owner);
    if (vo) st.vos.add(vo);
  }
  async function loadJobs() {
    const gen = ++jobsGen;
    const js = await api(jobsQuery(0));
    if (gen !== jobsGen) return; // a later reload (another filter) is under way: its answer counts
    jobsGen++;
    st.jobs.clear();
    for (const j of js) { st.jobs.set(j.id, j); remember(j.owner, j.vo); }
    st.jobsOlder = js.length === jobsPage;
    suggest();
    schedule();
  }
  async function loadOlderJobs() {
    const gen = jobsGen;
    const js = await api(jobsQuery(Math.min(...st.jobs.keys())));
    if (gen !== jobsGen) return; // the table was reloaded meanwhile
    for (const j of js) st.jobs.set(j.id, j);
    st.jobsOlder = js.length === jobsPage;
    schedule();
  }
  // belongs says whether a job the table has not loaded goes in it: a
  // job newer than every loaded one (submitted since), or any when every
  // job is loaded, and only with no filter the server applies. A job on
  // an older page not yet asked for stays out: added, it would break the
  // pages' order (the next older page starts below the oldest loaded).
  function belongs(id) {
    if (st.jobs.has(id)) return true;
    if (withQ()) return false;
    return !st.jobsOlder || !st.jobs.size || id > Math.max(...st.jobs.keys());
  }
  async function loadJob(id) {
    if (!belongs(id)) return;
    const gen = jobsGen;
    try {
      const j = await api("/v1/jobs/" + id);
      if (gen !== jobsGen && !st.jobs.has(j.id)) return;
      if (!belongs(j.id)) return;
      st.jobs.set(j.id, j);
      if (st.detail && st.detail.job.id === j.id) st.detail.job = j;
      schedule();
    } catch (e) { /* not ours, or gone */ }
  }
  async function loadEndpoints() {
    const [es, status] = await Promise.all([api("/v1/endpoints"), api("/v1/status").catch(() => null)]);
    if (status) st.status = status;
    st.endpoints.clear();
    for (const e of es) st.endpoints.set(e.name, e);
    schedule();
  }
  // The history of the filters' range, read again while the page is
  // open. A range that begins
  // before the servers' first sample (a service started half an hour
  // ago, charted over 6 hours) is charted from that sample on, in finer
  // steps, rather than as an empty chart with the data squeezed at its
  // right edge; the filters' note says so.
  let histTimer = null;
  async function loadHistory() {
    clearTimeout(histTimer);
    histTimer = null;
    if (st.synthetic) return;
    const get = (from, to) => api(`/v1/history?from=${new Date(from).toISOString()}&to=${new Date(to).toISOString()}` + (scope() ? "&" + scope() : ""));
    const now = Date.now(), span = 1000 * Number($("f-range").value);
    try {
      let from = Math.max(now - span, st.firstSample || 0);
      let h = await get(from, now);
      const i0 = h.total.throughput.findIndex((v) => v != null);
      if (i0 > 0 && !st.firstSample) {
        // Learnt once (samples are pruned from the old end only), then
        // to the finer step of the range that begins there.
        st.firstSample = 1000 * h.times[i0];
        if (i0 > h.times.length / 10) {
          h = await get(st.firstSample, now);
          const i1 = h.total.throughput.findIndex((v) => v != null);
          if (i1 > 0) st.firstSample = 1000 * h.times[i1];
        }
      }
      st.hist = h;
      schedule();
    } finally {
      // Again after a sample, or half a bucket of a long range: a day's
      // buckets change every few minutes, and reading one costs the
      // store a scan of the day's samples.
      const h = st.hist;
      if (st.token && !st.synthetic) histTimer = setTimeout(() => loadHistory().catch(showError), 1000 * Math.max(5, (h && h.sample_seconds) || 15, (h && h.step_seconds / 2) || 0));
    }
  }
  let failQuery = "";
  async function loadFailures(older) {
    let q = "/v1/failures?limit=100" + (withQ() ? "&" + withQ() : "");
    if (older && st.failures.length) {
      const f = st.failures[st.failures.length - 1];
      q += "&before=" + encodeURIComponent(f.finished) + "&before_id=" + f.id;
    }
    const base = q;
    failQuery = base;
    const fs = await api(q);
    if (failQuery !== base) return; // a newer request replaced this one
    st.failures = older ? st.failures.concat(fs) : fs;
    st.failOlder = fs.length === 100;
    for (const f of fs) remember(f.owner, f.vo);
    suggest();
    schedule();
  }
  function suggest() {
    const fill = (id, set) => { $(id).innerHTML = [...set].sort().map((v) => `<option value="${esc(v)}">`).join(""); };
    fill("f-users", st.users);
    fill("f-vos", st.vos);
  }
  let epTimer = null, epLast = 0;
  function refreshEndpointsSoon() {
    if (st.synthetic || epTimer) return;
    const wait = Math.max(0, 1000 - (Date.now() - epLast));
    epTimer = setTimeout(() => { epTimer = null; epLast = Date.now(); loadEndpoints().catch(showError); }, wait);
  }
  let filesTimer = null;
  function refreshFilesSoon(id) {
    if (filesTimer || !st.detail || st.detail.job.id !== id) return;
    filesTimer = setTimeout(() => { filesTimer = null; if (st.detail && st.detail.job.id === id) openJob(id, true, st.detail.from); }, 1000);
  }

  // ---- events ----
  function onEvent(ev) {
    switch (ev.type) {
      case "progress": {
        const j = st.jobs.get(ev.job);
        if (j) {
          j.files_done = ev.files_done || 0;
          j.files = ev.files || j.files;
          j.bytes_done = ev.bytes_done || 0;
          j.bytes = ev.bytes || j.bytes;
          j.throughput = ev.throughput || 0;
          j.eta_seconds = j.throughput > 0 ? (j.bytes - j.bytes_done) / j.throughput : 0;
          schedule();
        } else loadJob(ev.job);
        refreshFilesSoon(ev.job);
        break;
      }
      case "job":
        loadJob(ev.job);
        if (ev.state === "failed" && st.view === "failures") loadFailures(false).catch(showError);
        break;
      case "task":
        refreshFilesSoon(ev.job);
        break;
      case "error":
        showError(new Error(ev.detail || "event stream error"));
        return;
    }
    refreshEndpointsSoon();
  }
  async function connect() {
    let backoff = 1000;
    const ctl = new AbortController();
    st.abort = ctl;
    while (!ctl.signal.aborted) {
      $("live").textContent = "connecting";
      $("live").classList.remove("on");
      try {
        const r = await fetch("/v1/events", { headers: { Authorization: "Bearer " + st.token, Accept: "text/event-stream" }, signal: ctl.signal });
        if (r.status === 401) { logout("Your token was refused; sign in again."); return; }
        if (!r.ok || !r.body) throw new Error("events: " + r.status);
        live(true);
        backoff = 1000;
        const rd = r.body.getReader();
        const dec = new TextDecoder();
        let buf = "", data = [];
        for (;;) {
          const { value, done } = await rd.read();
          if (done) break;
          buf += dec.decode(value, { stream: true });
          let i;
          while ((i = buf.indexOf("\n")) >= 0) {
            const line = buf.slice(0, i).replace(/\r$/, "");
            buf = buf.slice(i + 1);
            if (line === "") {
              if (data.length) {
                try { onEvent(JSON.parse(data.join("\n"))); } catch (e) { /* not JSON */ }
              }
              data = [];
            } else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
          }
        }
      } catch (e) {
        if (ctl.signal.aborted) return;
      }
      live(false);
      await new Promise((res) => setTimeout(res, backoff));
      backoff = Math.min(30000, backoff * 2);
      if (!ctl.signal.aborted) { loadJobs().catch(() => {}); refreshEndpointsSoon(); }
    }
  }
  function live(on) {
    $("live").textContent = on ? "live" : "reconnecting";
    $("live").classList.toggle("on", on);
  }

  // ---- charts ----
  // Three kinds, each over the history's buckets: throughput (MB/s),
  // files queued and running (averages), files done and failed (counts,
  // bars). A null is a time no server sampled: a gap, not a zero.
  const AXIS = { stroke: "#1a1a1a", grid: { stroke: "#e2e6ea" } };
  const KINDS = {
    thr: { unit: "MB/s", series: [{ label: "MB/s", stroke: "#0a4f8f", fill: "rgba(10,79,143,0.12)" }], vals: (s) => [s.throughput.map((v) => (v == null ? null : v / 1e6))] },
    files: { unit: "files", series: [{ label: "queued", stroke: "#7a4b00" }, { label: "running", stroke: "#1b6e20" }], vals: (s) => [s.queued, s.running] },
    ends: { unit: "files", bars: true, series: [{ label: "done", stroke: "#1b6e20", fill: "rgba(27,110,32,0.55)" }, { label: "failed", stroke: "#a4161a", fill: "rgba(164,22,26,0.75)" }], vals: (s) => [s.done, s.failed] },
  };
  function chartOpts(kind, el, height, legend) {
    const k = KINDS[kind];
    const bars = k.bars && uPlot.paths && uPlot.paths.bars;
    return {
      width: Math.max(260, el.clientWidth || 380), height,
      legend: { show: legend },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(kind === "thr" ? 1 : 2, (max || 0) * 1.1)] } },
      axes: [AXIS, { ...AXIS, size: 50, label: k.unit, labelSize: 14 }],
      series: [{}].concat(k.series.map((s, i) => ({
        label: s.label, stroke: s.stroke, fill: s.fill, width: bars ? 1 : 2,
        points: { show: !bars, size: 3 },
        paths: bars ? uPlot.paths.bars({ size: [0.8 / k.series.length, 40], align: i ? 1 : -1 }) : undefined,
      }))),
    };
  }
  // draw makes or updates the chart key in el from series s of history h.
  function draw(key, el, kind, h, s, height = 170, legend = true) {
    if (typeof uPlot === "undefined" || !el) return;
    const data = [h ? h.times : []].concat(s ? KINDS[kind].vals(s) : KINDS[kind].series.map(() => []));
    let c = st.charts.get(key);
    if (c && !el.contains(c.root)) { c.destroy(); st.charts.delete(key); c = null; }
    if (!c) {
      el.textContent = "";
      c = new uPlot(chartOpts(kind, el, height, legend), data, el);
      st.charts.set(key, c);
    } else c.setData(data);
  }
  const zeroSeries = (h) => { const z = h.times.map(() => null); return { throughput: z, queued: z, running: z, done: z, failed: z, bytes: 0, files_done: 0, files_failed: 0 }; };
  const epHist = (name) => (st.hist && st.hist.endpoints.find((e) => e.name === name)) || null;
  const linkHist = (src, dst) => (st.hist && st.hist.links.find((l) => l.source === src && l.destination === dst)) || null;
  function rangeNote() {
    const h = st.hist;
    if (!h) return "";
    const since = st.firstSample && st.firstSample > Date.now() - 1000 * Number($("f-range").value)
      ? ` (since the first sample, ${new Date(st.firstSample).toLocaleTimeString()})` : "";
    return `last ${$("f-range").selectedOptions[0].textContent}${since}, in steps of ${dur(h.step_seconds)}`;
  }
  const matches = (...names) => { const q = search().toLowerCase(); return !q || names.some((n) => String(n || "").toLowerCase().includes(q)); };

  // ---- rendering ----
  let pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; render(); });
  }
  function render() {
    if (!st.me) return;
    $("f-note").textContent = st.view === "overview" || st.view === "links" || st.view === "detail" ? rangeNote() : "";
    switch (st.view) {
      case "overview": renderOverview(); break;
      case "links": renderLinks(); break;
      case "detail": renderFocus(); break;
      case "failures": renderFailures(); break;
      case "endpoints": renderEndpointsTable(); break;
      case "jobs": renderJobs(); break;
      case "job": renderDetail(); break;
    }
  }

  function activeJobs() {
    return [...st.jobs.values()].filter((j) => j.state === "active" && matches(j.label, j.owner, j.id));
  }
  function renderOverview() {
    const act = activeJobs();
    const by = { interactive: 0, batch: 0 };
    let thr = 0;
    for (const j of act) { by[j.class] = (by[j.class] || 0) + 1; thr += j.throughput || 0; }
    const eps = [...st.endpoints.values()];
    const up = eps.filter((e) => e.up).length;
    const cc = eps.reduce((a, e) => a + (e.cc || 0), 0);
    const s = st.status;
    const h = st.hist;
    const queues = s
      ? `<div class="card">Interactive files, queued / running<b>${s.interactive.queued} / ${s.interactive.running}</b></div>` +
        `<div class="card">Batch files, queued / running<b>${s.batch.queued} / ${s.batch.running}</b></div>` +
        `<div class="card">Scheduler<b>${esc(s.scheduler)}</b><span class="hint">cycle ${s.cycle_seconds < 0.001 ? (1e6 * s.cycle_seconds).toFixed(0) + " µs" : (1000 * s.cycle_seconds).toFixed(1) + " ms"} every ${(1000 * s.period_seconds).toFixed(0)} ms</span></div>`
      : "";
    const range = h
      ? `<div class="card">Moved in the range<b>${bytes(h.total.bytes)}</b><span class="hint">${h.total.files_done} files done</span></div>` +
        `<div class="card">Failed in the range<b class="${h.total.files_failed ? "down" : ""}">${h.total.files_failed}</b><span class="hint"><a href="#/failures">failures</a></span></div>`
      : "";
    $("summary").innerHTML =
      `<div class="card">Endpoints up<b>${up} / ${eps.length}</b></div>` + queues + range +
      `<div class="card">Active jobs<b>${by.interactive + by.batch}</b><span class="hint">${by.interactive} interactive, ${by.batch} batch</span></div>` +
      `<div class="card">Concurrency<b>${cc}</b></div>` +
      `<div class="card">Throughput of the active jobs<b>${rate(thr)}</b></div>`;
    if (h) {
      draw("ov-thr", $("ov-thr"), "thr", h, h.total);
      draw("ov-files", $("ov-files"), "files", h, h.total);
      draw("ov-ends", $("ov-ends"), "ends", h, h.total);
    }
    renderEndpointCards(eps.filter((e) => matches(e.name)));
    const rows = act.sort((a, b) => b.id - a.id).map((j) =>
      `<tr><td><a href="#/jobs/${j.id}">${j.id}</a></td><td>${esc(j.owner)}</td><td>${esc(j.class)}</td><td>${esc(j.label)}</td>` +
      `<td>${progress(j.bytes_done, j.bytes, "job " + j.id + " progress")}</td><td class="num">${rate(j.throughput)}</td><td class="num">${dur(j.eta_seconds)}</td></tr>`).join("");
    $("running").innerHTML = act.length
      ? `<table><caption class="hint">${act.length} active job${act.length === 1 ? "" : "s"}</caption><thead><tr><th scope="col">Job</th><th scope="col">Owner</th><th scope="col">Class</th><th scope="col">Label</th><th scope="col">Progress</th><th scope="col" class="num">Throughput</th><th scope="col" class="num">ETA</th></tr></thead><tbody>${rows}</tbody></table>`
      : `<p class="hint">Nothing running.</p>`;
  }

  // The overview's endpoint cards, each with its throughput chart from
  // the history. Charts are made when their card scrolls into view: 100
  // endpoints do not cost 100 charts up front.
  let observer = null;
  function renderEndpointCards(eps) {
    const box = $("endpoints");
    const seen = new Set();
    for (const e of eps) {
      seen.add(e.name);
      let card = box.querySelector(`[data-ep="${CSS.escape(e.name)}"]`);
      if (!card) {
        card = document.createElement("div");
        card.className = "card ep";
        card.dataset.ep = e.name;
        card.innerHTML = `<h4><a class="name"></a><span class="state"></span></h4><div class="stats"></div><div class="chart" role="img"></div>`;
        card.querySelector(".name").textContent = e.name;
        card.querySelector(".name").href = "#/endpoint/" + encodeURIComponent(e.name);
        card.querySelector(".chart").setAttribute("aria-label", `Throughput of ${e.name} over time, MB/s`);
        box.appendChild(card);
        if (!observer) observer = new IntersectionObserver(onVisible, { rootMargin: "200px" });
        observer.observe(card);
      }
      const s = card.querySelector(".state");
      s.textContent = e.up ? "up" : "down";
      s.className = "state " + (e.up ? "up" : "down");
      card.querySelector(".stats").textContent =
        `${rate(e.throughput)} now · cc ${e.cc}${e.max_cc ? " / " + e.max_cc : ""} · peak ${rate(e.peak_throughput)}`;
      if (st.charts.has("ep:" + e.name)) drawCard(card);
    }
    for (const card of [...box.children]) {
      if (!seen.has(card.dataset.ep)) {
        const ch = st.charts.get("ep:" + card.dataset.ep);
        if (ch) { ch.destroy(); st.charts.delete("ep:" + card.dataset.ep); }
        observer.unobserve(card);
        card.remove();
      }
    }
  }
  function drawCard(card) {
    const h = st.hist;
    if (!h) return;
    draw("ep:" + card.dataset.ep, card.querySelector(".chart"), "thr", h, epHist(card.dataset.ep) || zeroSeries(h), 130, false);
  }
  function onVisible(entries) {
    for (const en of entries) {
      if (en.isIntersecting && !st.charts.has("ep:" + en.target.dataset.ep)) drawCard(en.target);
    }
  }

  // spark is a throughput series as a small inline SVG line: a row per
  // link needs no chart object of its own.
  function spark(vals) {
    const w = 160, ht = 28, n = vals.length;
    const max = Math.max(1, ...vals.filter((v) => v != null));
    let d = "", pen = false;
    vals.forEach((v, i) => {
      if (v == null) { pen = false; return; }
      const x = n > 1 ? (w * i) / (n - 1) : 0, y = ht - 1 - ((ht - 2) * v) / max;
      d += (pen ? "L" : "M") + x.toFixed(1) + " " + y.toFixed(1);
      pen = true;
    });
    return `<svg class="spark" width="${w}" height="${ht}" viewBox="0 0 ${w} ${ht}" role="img" aria-label="throughput over the range, at most ${esc(rate(max))}"><path d="${d}" fill="none" stroke="#0a4f8f" stroke-width="1.5"/></svg>`;
  }

  // Links: every pair of the history, with what it did in the range.
  function linkRow(l, h) {
    const href = `#/link/${encodeURIComponent(l.source)}/${encodeURIComponent(l.destination)}`;
    return `<tr><td><a href="${href}">${esc(l.source)} → ${esc(l.destination)}</a></td><td>${spark(l.throughput)}</td>` +
      `<td class="num">${rate(last(l.throughput))}</td><td class="num">${num(last(l.queued))}</td><td class="num">${num(last(l.running))}</td>` +
      `<td class="num">${bytes(l.bytes)}</td><td class="num">${l.files_done}</td><td class="num ${l.files_failed ? "down" : ""}">${l.files_failed}</td>` +
      `<td class="num">${rate(l.bytes / ((Date.parse(h.to) - Date.parse(h.from)) / 1000))}</td></tr>`;
  }
  const linkHead = `<thead><tr><th scope="col">Link</th><th scope="col">Throughput over the range</th><th scope="col" class="num">Throughput, last sample</th><th scope="col" class="num">Queued</th><th scope="col" class="num">Running</th>` +
    `<th scope="col" class="num">Moved</th><th scope="col" class="num">Done</th><th scope="col" class="num">Failed</th><th scope="col" class="num">Mean rate</th></tr></thead>`;
  function renderLinks() {
    const h = st.hist;
    if (!h) { $("links").innerHTML = `<p class="hint">Loading…</p>`; return; }
    const ls = h.links.filter((l) => matches(l.source, l.destination));
    $("links").innerHTML = ls.length
      ? `<table id="links-table">${linkHead}<tbody>${ls.map((l) => linkRow(l, h)).join("")}</tbody></table>`
      : `<p class="hint">No link carried or held files in the range${search() ? " that matches the search" : ""}.</p>`;
  }

  // The detail view of one link or one endpoint.
  function renderFocus() {
    const f = st.focus, h = st.hist;
    if (!f || !h) return;
    const s = (f.ep ? epHist(f.ep) : linkHist(f.src, f.dst)) || zeroSeries(h);
    const sum = [
      `<div class="card">Moved in the range<b>${bytes(s.bytes)}</b></div>`,
      `<div class="card">Files done<b>${s.files_done}</b></div>`,
      `<div class="card">Files failed<b class="${s.files_failed ? "down" : ""}">${s.files_failed}</b></div>`,
      `<div class="card">Queued / running, last sample<b>${num(last(s.queued))} / ${num(last(s.running))}</b></div>`,
    ];
    if (f.ep) {
      const e = st.endpoints.get(f.ep);
      if (e) {
        sum.unshift(`<div class="card">State<b class="${e.up ? "up" : "down"}">${e.up ? "up" : "down"}</b><span class="hint">seen ${esc(when(e.last_seen))}</span></div>`,
          `<div class="card">Now<b>${rate(e.throughput)}</b><span class="hint">cc ${e.cc}${e.max_cc ? " of " + e.max_cc : ""}</span></div>`,
          `<div class="card">Capacity<b>${rate(capacity(e, s))}</b><span class="hint">${e.max_throughput ? "configured" : capacity(e, s) ? "learned: highest seen" : "not yet known"}</span></div>`);
      }
      const ls = h.links.filter((l) => l.source === f.ep || l.destination === f.ep);
      $("detail-links").innerHTML = `<h3>Its links</h3>` + (ls.length ? `<table>${linkHead}<tbody>${ls.map((l) => linkRow(l, h)).join("")}</tbody></table>` : `<p class="hint">None in the range.</p>`);
    } else $("detail-links").textContent = "";
    $("detail-summary").innerHTML = sum.join("");
    draw("d-thr", $("d-thr"), "thr", h, s);
    draw("d-files", $("d-files"), "files", h, s);
    draw("d-ends", $("d-ends"), "ends", h, s);
    const fs = st.failures.filter((x) => (f.ep ? x.source_endpoint === f.ep || x.destination_endpoint === f.ep : x.source_endpoint === f.src && x.destination_endpoint === f.dst));
    $("detail-failures").innerHTML = failuresTable(fs.slice(0, 20), "None among the latest failures.");
  }

  function failuresTable(fs, none) {
    if (!fs.length) return `<p class="hint">${esc(none)}</p>`;
    return `<table class="failures-table"><thead><tr><th scope="col">Failed</th><th scope="col">File</th><th scope="col">Owner</th><th scope="col">Source</th><th scope="col">Destination</th><th scope="col" class="num">Attempts</th><th scope="col">Why</th></tr></thead><tbody>` +
      fs.map((f) => `<tr><td>${esc(when(f.finished))}</td><td><a href="#/jobs/${f.job}/${f.index}">job ${f.job} #${f.index}</a>${f.label ? `<br><span class="hint">${esc(f.label)}</span>` : ""}</td>` +
        `<td>${esc(f.owner)}<br><span class="hint">${esc(f.vo)}</span></td><td class="mono">${esc(f.source)}</td><td class="mono">${esc(f.destination)}</td>` +
        `<td class="num">${f.attempts}</td><td class="reason">${esc(f.error)}</td></tr>`).join("") + `</tbody></table>`;
  }
  function renderFailures() {
    $("failures").innerHTML = failuresTable(st.failures, search() ? "No failed file matches the search." : "No failed files.") +
      (st.failOlder ? `<p><button type="button" id="fail-older">Show older failures</button></p>` : "");
  }
  $("failures").addEventListener("click", (ev) => {
    if (ev.target.id !== "fail-older") return;
    ev.target.disabled = true;
    loadFailures(true).catch(showError);
  });

  // capacity is an endpoint's configured maximum, or the most it was
  // seen to carry: the server's peak, or the history's in the range.
  function capacity(e, s) {
    if (e.max_throughput) return e.max_throughput;
    return Math.max(e.peak_throughput || 0, ...((s && s.throughput) || []).filter((v) => v != null));
  }

  // The endpoints: state, capacity (configured, or learned from what
  // they carried), and load now.
  function renderEndpointsTable() {
    const h = st.hist;
    const eps = [...st.endpoints.values()].filter((e) => matches(e.name, e.url));
    const rows = eps.map((e) => {
      const s = epHist(e.name);
      const cap = capacity(e, s);
      return `<tr><td><a href="#/endpoint/${encodeURIComponent(e.name)}">${esc(e.name)}</a><br><span class="hint mono">${esc(e.url)}</span></td><td>${esc(e.kind)}${e.via ? ` via ${esc(e.via)}` : ""}</td>` +
        `<td><span class="pill ${e.up ? "up" : "down"}">${e.up ? "up" : "down"}</span><br><span class="hint">seen ${esc(when(e.last_seen))}</span></td>` +
        `<td class="num">${cap ? rate(cap) : "–"}<br><span class="hint">${e.max_throughput ? "configured" : cap ? "learned: highest seen" : "not yet known"}</span></td>` +
        `<td class="num">${rate(e.throughput)}<br><span class="bar" title="${pct(e.throughput, cap).toFixed(0)}% of capacity"><span style="width:${pct(e.throughput, cap).toFixed(0)}%"></span></span></td>` +
        `<td class="num">${e.cc}${e.max_cc ? " / " + e.max_cc : ""}</td>` +
        `<td class="num">${s ? num(last(s.queued)) + " / " + num(last(s.running)) : "–"}</td>` +
        `<td class="num">${s ? bytes(s.bytes) : "–"}</td><td class="num ${s && s.files_failed ? "down" : ""}">${s ? s.files_failed : "–"}</td></tr>`;
    }).join("");
    $("eps-table").innerHTML = eps.length
      ? `<table id="endpoints-table"><thead><tr><th scope="col">Endpoint</th><th scope="col">Kind</th><th scope="col">State</th><th scope="col" class="num">Capacity</th><th scope="col" class="num">Load now</th>` +
        `<th scope="col" class="num">Concurrency</th><th scope="col" class="num">Queued / running</th><th scope="col" class="num">Moved${h ? ", " + esc($("f-range").selectedOptions[0].textContent) : ""}</th><th scope="col" class="num">Failed</th></tr></thead><tbody>${rows}</tbody></table>`
      : `<p class="hint">No endpoints${search() ? " match the search" : ""}.</p>`;
  }

  function sortedJobs() {
    const state = $("job-state").value;
    return [...st.jobs.values()].filter((j) => !state || j.state === state).sort((a, b) => b.id - a.id);
  }
  function renderJobs() {
    const js = sortedJobs();
    const focused = document.activeElement && document.activeElement.dataset ? document.activeElement.dataset.job : null;
    const rows = js.map((j) =>
      `<tr><td><a href="#/jobs/${j.id}" data-job="${j.id}">${j.id}</a></td><td class="state-${esc(j.state)}">${esc(j.state)}</td><td>${esc(j.owner)}<br><span class="hint">${esc(j.vo)}</span></td><td>${esc(j.label)}</td><td>${esc(j.class)}</td>` +
      `<td>${progress(j.bytes_done, j.bytes, "job " + j.id + " progress")} <span class="hint">${j.files_done}/${j.files} files${j.files_failed ? `, <span class="down">${j.files_failed} failed</span>` : ""}</span></td>` +
      `<td class="num">${j.state === "active" ? rate(j.throughput) : "–"}</td><td class="num">${j.state === "active" ? dur(j.eta_seconds) : "–"}</td></tr>`).join("");
    $("jobs").innerHTML = js.length
      ? `<table id="jobs-table"><thead><tr><th scope="col">Job</th><th scope="col">State</th><th scope="col">Owner</th><th scope="col">Label</th><th scope="col">Class</th><th scope="col">Progress</th><th scope="col" class="num">Throughput</th><th scope="col" class="num">ETA</th></tr></thead><tbody>${rows}</tbody></table>`
      : `<p class="hint">No jobs${withQ() ? " match the filters" : ""}.</p>`;
    if (js.length && st.jobsOlder) $("jobs").insertAdjacentHTML("beforeend", `<p><button type="button" id="jobs-older">Show ${jobsPage} older jobs</button></p>`);
    if (focused) { const a = $("jobs").querySelector(`a[data-job="${focused}"]`); if (a) a.focus(); }
  }
  $("jobs").addEventListener("click", (ev) => {
    if (ev.target.id !== "jobs-older") return;
    ev.target.disabled = true;
    loadOlderJobs().catch(showError);
  });
  // Arrow keys move between the jobs table's rows.
  $("jobs").addEventListener("keydown", (ev) => {
    if (ev.key !== "ArrowDown" && ev.key !== "ArrowUp" && ev.key !== "Home" && ev.key !== "End") return;
    const links = [...$("jobs").querySelectorAll("a[data-job]")];
    if (!links.length) return;
    let i = links.indexOf(document.activeElement);
    if (ev.key === "ArrowDown") i = Math.min(links.length - 1, i + 1);
    else if (ev.key === "ArrowUp") i = Math.max(0, i - 1);
    else if (ev.key === "Home") i = 0;
    else i = links.length - 1;
    links[i].focus();
    ev.preventDefault();
  });

  // A job's page lists FILES_PAGE of its files (#/jobs/ID/FROM: those
  // from index FROM on), with links to the pages before and after. It is
  // redrawn at every progress event and files refresh (twice a second
  // while the job runs): a thousand rows kept the page busy most of the
  // time and a job's later files out of reach.
  const FILES_PAGE = 100;
  async function openJob(id, quiet, from = 0) {
    try {
      const [job, files] = await Promise.all([api("/v1/jobs/" + id), api(`/v1/jobs/${id}/files?from=${from}&limit=${FILES_PAGE}`)]);
      st.jobs.set(job.id, job);
      if (st.page !== id + "/" + from) { schedule(); return; } // the page was left meanwhile
      st.detail = { job, files, from };
      schedule();
    } catch (e) {
      if (!quiet) { $("job-detail").innerHTML = `<p class="error">Job ${esc(id)}: ${esc(e.message)}</p>`; }
    }
  }
  function renderDetail() {
    const d = st.detail;
    if (!d) return;
    const j = st.jobs.get(d.job.id) || d.job;
    $("job-h").textContent = `Job ${j.id}` + (j.label ? ` · ${j.label}` : "");
    const kv = [
      ["State", `<span class="state-${esc(j.state)}">${esc(j.state)}</span>`], ["Owner", esc(j.owner) + " / " + esc(j.vo)], ["Class", esc(j.class)],
      ["Priority", j.priority || "–"], ["Created", esc(new Date(j.created).toLocaleString())], ["Finished", j.finished ? esc(new Date(j.finished).toLocaleString()) : "–"],
      ["Progress", progress(j.bytes_done, j.bytes, "job progress") + ` ${bytes(j.bytes_done)} of ${bytes(j.bytes)}`],
      ["Files", `${j.files_done} done, ${j.files_failed} failed, ${j.files_canceled} canceled, of ${j.files}`],
      ["Throughput", j.state === "active" ? rate(j.throughput) : "–"], ["ETA", j.state === "active" ? dur(j.eta_seconds) : "–"],
      ["Concurrency", j.streams ? `fixed at ${j.streams}` : j.optimization ? "estimated per pair" : j.adaptive ? "adaptive (Policy Service)" : "chosen by the scheduler"],
      ["Checksum", (j.verify_checksum ? "verified, " : "not verified, ") + esc(j.checksum_algorithm)],
    ];
    const files = d.files.map((f) =>
      `<tr${f.index === d.from && d.from > 0 ? ' class="hit"' : ""}><td class="num">${f.index}</td><td class="mono">${esc(f.source)}</td><td class="mono">${esc(f.destination)}</td><td class="state-${esc(f.state)}">${esc(f.state)}</td>` +
      `<td>${progress(f.bytes_done, f.size, "file " + f.index + " progress")}</td><td class="num">${bytes(f.size)}</td><td class="num">${f.cc || "–"}</td><td class="num">${f.attempts || 0}</td><td class="num">${f.preemptions || 0}</td>` +
      `<td class="num">${rate(f.throughput)}</td><td class="num">${f.slowdown ? f.slowdown.toFixed(2) : "–"}</td><td class="num">${dur(f.wait_seconds)}</td>` +
      `<td class="mono">${esc(f.checksum || "")}${f.expected_checksum ? `<br><span class="hint">expected ${esc(f.expected_checksum)}</span>` : ""}</td><td>${esc(f.error || "")}</td></tr>`).join("");
    $("job-detail").innerHTML =
      (j.state === "active" ? `<p><button id="cancel" type="button" class="danger">Cancel job ${j.id}</button></p>` : "") +
      `<dl class="kv">${kv.map(([k, v]) => `<dt>${k}</dt><dd>${v}</dd>`).join("")}</dl>` +
      `<h3>Files${d.files.length < j.files ? ` ${d.from + 1} to ${d.from + d.files.length} of ${j.files}` : ""}</h3>` +
      (d.files.length < j.files
        ? `<nav class="pager" aria-label="File pages">${d.from > 0 ? `<a href="#/jobs/${j.id}/${Math.max(0, d.from - FILES_PAGE)}">Previous ${FILES_PAGE}</a> ` : ""}` +
          `${d.files.length && d.from + d.files.length < j.files ? `<a href="#/jobs/${j.id}/${d.from + d.files.length}">Next ${FILES_PAGE}</a>` : ""}</nav>`
        : "") +
      `<table id="files-table"><thead><tr><th scope="col" class="num">#</th><th scope="col">Source</th><th scope="col">Destination</th><th scope="col">State</th><th scope="col">Progress</th><th scope="col" class="num">Size</th><th scope="col" class="num">CC</th><th scope="col" class="num">Attempts</th><th scope="col" class="num">Preemptions</th><th scope="col" class="num">Throughput</th><th scope="col" class="num">Slowdown</th><th scope="col" class="num">Wait</th><th scope="col">Checksum</th><th scope="col">Error</th></tr></thead><tbody>${files}</tbody></table>`;
    const b = $("cancel");
    if (b) b.addEventListener("click", async () => {
      if (!confirm(`Cancel job ${j.id}? Files not yet done are abandoned.`)) return;
      b.disabled = true;
      try {
        const cj = await api("/v1/jobs/" + j.id, { method: "DELETE" });
        st.jobs.set(cj.id, cj);
        await openJob(cj.id, false, d.from);
      } catch (e) { showError(e); b.disabled = false; }
    });
  }

  async function renderAllocations() {
    const box = $("allocations");
    try {
      const als = await api("/v1/allocations");
      let html = `<h3>Allocations${st.me.admin ? "" : " (yours)"}</h3>`;
      html += als.length
        ? `<table><thead><tr><th scope="col">Id</th><th scope="col">Source</th><th scope="col">Destination</th><th scope="col">Client</th><th scope="col">VO</th><th scope="col" class="num">Streams</th><th scope="col" class="num">Wanted</th><th scope="col">Expires</th></tr></thead><tbody>` +
          als.map((a) => `<tr><td class="mono">${esc(a.id)}</td><td>${esc(a.source)}</td><td>${esc(a.destination)}</td><td>${esc(a.client)}</td><td>${esc(a.vo)}</td><td class="num">${a.streams}</td><td class="num">${a.want || "–"}</td><td>${esc(new Date(a.expires).toLocaleTimeString())}</td></tr>`).join("") +
          `</tbody></table>`
        : `<p class="hint">No allocations.</p>`;
      if (st.me.admin) {
        const us = await api("/v1/policy/usage");
        const vo = {};
        for (const u of us) for (const [k, v] of Object.entries(u.per_vo || {})) vo[k] = (vo[k] || 0) + v;
        html += `<h3>Streams per pair</h3>` + (us.length
          ? `<table><thead><tr><th scope="col">Source</th><th scope="col">Destination</th><th scope="col">Used</th><th scope="col" class="num">Draining</th><th scope="col" class="num">Allocations</th><th scope="col">Per VO</th></tr></thead><tbody>` +
            us.map((u) => `<tr><td>${esc(u.source)}</td><td>${esc(u.destination)}</td><td>${progress(u.used, u.pair_max, "streams used")} ${u.used} / ${u.pair_max}</td><td class="num">${u.draining}</td><td class="num">${u.allocations}</td><td>${esc(Object.entries(u.per_vo || {}).map(([k, v]) => k + ": " + v).join(", "))}</td></tr>`).join("") +
            `</tbody></table>`
          : `<p class="hint">No streams allocated.</p>`);
        html += `<h3>Streams per VO</h3>` + (Object.keys(vo).length
          ? `<table><thead><tr><th scope="col">VO</th><th scope="col" class="num">Streams</th></tr></thead><tbody>` +
            Object.entries(vo).map(([k, v]) => `<tr><td>${esc(k)}</td><td class="num">${v}</td></tr>`).join("") + `</tbody></table>`
          : `<p class="hint">None.</p>`);
      }
      box.innerHTML = html;
    } catch (e) {
      box.innerHTML = `<p class="error">${esc(e.message)}</p>`;
    }
  }

  // ---- submit, with the estimate first ----
  // The form's lines: SOURCE DESTINATION [SIZE].
  function formFiles() {
    const out = [];
    const lines = $("s-files").value.split("\n").map((l) => l.trim()).filter((l) => l && !l.startsWith("#"));
    for (const [i, l] of lines.entries()) {
      const [src, dst, size, extra] = l.split(/\s+/);
      if (!dst || extra) throw new Error(`line ${i + 1}: want SOURCE DESTINATION [SIZE]`);
      const f = { source: src, destination: dst };
      if (size) {
        const n = parseSize(size);
        if (!(n > 0)) throw new Error(`line ${i + 1}: size ${size}: want bytes, or a number with kB, MB, GB, TB (or KiB, MiB, ...)`);
        f.size = n;
      }
      out.push(f);
    }
    if (!out.length) throw new Error("no files: give one SOURCE DESTINATION per line");
    return out;
  }
  const endpointOf = (u) => { const m = /^[a-z][a-z0-9+.-]*:\/\/([^/]+)/i.exec(u); return m ? m[1] : "?"; };
  function formText() {
    return [$("s-files").value, $("s-recursive").checked, $("s-class").value].join("|");
  }
  async function estimateForm() {
    $("s-error").textContent = "";
    let files;
    try { files = formFiles(); } catch (e) { $("s-error").textContent = e.message; return; }
    // One estimate per endpoint pair, for the bytes it is to carry.
    const pairs = new Map();
    for (const f of files) {
      const k = endpointOf(f.source) + " → " + endpointOf(f.destination);
      const p = pairs.get(k) || { first: f, size: 0, sized: true, n: 0 };
      p.n++;
      if (f.size) p.size += f.size; else p.sized = false;
      pairs.set(k, p);
    }
    const text = formText();
    $("s-estimate").disabled = true;
    $("s-submit").disabled = true;
    $("s-note").textContent = `Estimating ${pairs.size} pair${pairs.size === 1 ? "" : "s"}… (a pair without a recent estimate is sampled: a few seconds)`;
    const rows = [];
    let ok = true;
    for (const [k, p] of pairs) {
      try {
        const e = await api("/v1/estimate", { method: "POST", headers: { "Content-Type": "application/json" },
          body: JSON.stringify({ source: p.first.source, destination: p.first.destination, size: p.sized ? p.size : 1e9, use_history: $("s-history").checked }) });
        rows.push(`<tr><td>${esc(k)}</td><td class="num">${p.n}</td><td class="num">${p.sized ? bytes(p.size) : "?"}</td><td class="num">${e.streams}</td>` +
          `<td class="num">${rate(e.throughput)} <span class="hint">± ${(100 * e.uncertainty).toFixed(0)}%</span></td><td class="num">${p.sized ? dur(e.seconds) : `<span class="hint">give sizes</span>`}</td>` +
          `<td>${e.from_history ? "stored, measured " + esc(when(e.measured_at)) : `sampled: ${e.samples.length} samples, ${bytes(e.cost_bytes)} in ${dur(e.cost_seconds)}`}${e.note ? `<br><span class="hint">${esc(e.note)}</span>` : ""}</td></tr>`);
      } catch (err) {
        ok = false;
        if (err.message === "unauthorized") return;
        rows.push(`<tr><td>${esc(k)}</td><td class="num">${p.n}</td><td colspan="5" class="error">${esc(err.message)}</td></tr>`);
      }
    }
    $("s-estimates").innerHTML = `<h3>Estimate</h3><table class="est" id="estimate-table"><thead><tr><th scope="col">Pair</th><th scope="col" class="num">Files</th><th scope="col" class="num">Bytes</th>` +
      `<th scope="col" class="num">Streams</th><th scope="col" class="num">Throughput</th><th scope="col" class="num">Time</th><th scope="col">From</th></tr></thead><tbody>${rows.join("")}</tbody></table>`;
    $("s-estimate").disabled = false;
    st.estimated = ok ? text : "";
    $("s-submit").disabled = !ok;
    $("s-note").textContent = ok ? "Submit takes these files as estimated; change them and estimate again." : "Fix what the estimate refused, then estimate again.";
  }
  async function submitForm(ev) {
    ev.preventDefault();
    $("s-error").textContent = "";
    if (st.estimated !== formText()) {
      $("s-submit").disabled = true;
      $("s-note").textContent = "The files changed since the estimate: estimate again.";
      return;
    }
    let files;
    try { files = formFiles(); } catch (e) { $("s-error").textContent = e.message; return; }
    if ($("s-recursive").checked) for (const f of files) f.recursive = true;
    $("s-submit").disabled = true;
    try {
      const j = await api("/v1/jobs", { method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ label: $("s-label").value.trim(), class: $("s-class").value, verify_checksum: $("s-verify").checked, files }) });
      st.jobs.set(j.id, j);
      st.estimated = "";
      $("s-note").textContent = `Job ${j.id} submitted.`;
      location.hash = "#/jobs/" + j.id;
    } catch (e) {
      $("s-error").textContent = e.message === "unauthorized" ? "" : "Not submitted: " + e.message;
      $("s-submit").disabled = false;
    }
  }
  $("s-estimate").addEventListener("click", () => estimateForm().catch(showError));
  $("submit-form").addEventListener("submit", (ev) => submitForm(ev).catch(showError));
  for (const id of ["s-files", "s-recursive", "s-class"]) $(id).addEventListener("input", () => {
    if (st.estimated && st.estimated !== formText()) { $("s-submit").disabled = true; $("s-note").textContent = "The files changed since the estimate: estimate again."; }
  });

  // ---- routing ----
  const VIEWS = ["overview", "links", "detail", "failures", "endpoints", "jobs", "job", "submit", "allocations"];
  function route() {
    if (!st.me) return;
    const h = location.hash.replace(/^#\/?/, "");
    const parts = h.split("/").map((p) => { try { return decodeURIComponent(p); } catch (e) { return p; } });
    let view = parts[0] || "overview", nav = view;
    if (view === "jobs" && parts[1]) { view = "job"; nav = "jobs"; }
    if (view === "link" && parts[2]) { view = "detail"; nav = "links"; st.focus = { src: parts[1], dst: parts[2] }; }
    if (view === "endpoint" && parts[1]) { view = "detail"; nav = "endpoints"; st.focus = { ep: parts[1] }; }
    if (!VIEWS.includes(view)) view = nav = "overview";
    st.view = view;
    for (const v of document.querySelectorAll(".view")) v.hidden = v.id !== "view-" + view;
    for (const a of document.querySelectorAll("#nav a")) {
      if (a.dataset.view === nav) a.setAttribute("aria-current", "page");
      else a.removeAttribute("aria-current");
    }
    $("error").textContent = "";
    if (view === "job") {
      const id = parseInt(parts[1], 10);
      const from = Math.max(0, parseInt(parts[2], 10) || 0);
      st.page = id + "/" + from;
      if (!st.detail || st.detail.job.id !== id || st.detail.from !== from) { st.detail = null; $("job-detail").textContent = "Loading…"; $("job-h").textContent = "Job " + id; }
      openJob(id, false, from);
    } else if (view === "allocations") renderAllocations();
    else if (view === "failures" || view === "detail") loadFailures(false).catch(showError);
    else if (view === "endpoints") refreshEndpointsSoon();
    if (view === "detail") {
      const f = st.focus;
      $("detail-h").textContent = f.ep ? "Endpoint " + f.ep : `Link ${f.src} → ${f.dst}`;
      $("detail-back").innerHTML = f.ep ? `<a href="#/endpoints">&larr; All endpoints</a>` : `<a href="#/links">&larr; All links</a>`;
    }
    render();
  }
  window.addEventListener("hashchange", route);
  $("job-state").addEventListener("change", () => loadJobs().catch(showError));
  $("al-refresh").addEventListener("click", renderAllocations);
  $("logout").addEventListener("click", () => logout(""));
  $("login-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const t = $("token").value.trim();
    if (t) login(t);
  });
  // The filters: the range and the user and VO read the history again;
  // the search, as typed (after a pause), the jobs and failures (on the
  // server) and the rest of the views (here).
  $("filters").addEventListener("submit", (ev) => { ev.preventDefault(); refilter(true); });
  function refilter(history) {
    if (!st.me) return;
    if (history) loadHistory().catch(showError);
    loadJobs().catch(showError);
    if (st.view === "failures" || st.view === "detail") loadFailures(false).catch(showError);
    schedule();
  }
  $("f-range").addEventListener("change", () => refilter(true));
  $("f-user").addEventListener("change", () => refilter(true));
  $("f-vo").addEventListener("change", () => refilter(true));
  let qTimer = null;
  $("f-q").addEventListener("input", () => { clearTimeout(qTimer); qTimer = setTimeout(() => refilter(false), 300); });
  $("f-clear").addEventListener("click", () => {
    $("f-user").value = $("f-vo").value = $("f-q").value = "";
    refilter(true);
  });

  // Load measurement and test hooks (used by the browser test).
  window.sluiceDashboard = {
    // setJobsPage sets how many jobs the table asks for at a time and
    // reloads it (for tests).
    setJobsPage(n) {
      jobsPage = n;
      return loadJobs();
    },
    // points is how many buckets of an endpoint's throughput chart hold
    // a sample (for tests).
    points(name) {
      const s = epHist(name);
      return s ? s.throughput.filter((v) => v != null).length : 0;
    },
    // history reads the history again now (for tests).
    history() { return loadHistory(); },
    // loadSynthetic replaces the data with nEndpoints synthetic endpoints
    // and nJobs running jobs, stops the event stream and the history's
    // refresh, and renders the overview synchronously.
    loadSynthetic(nEndpoints, nJobs) {
      st.synthetic = true;
      if (st.abort) st.abort.abort();
      clearTimeout(histTimer);
      $("live").textContent = "synthetic data";
      $("live").classList.remove("on");
      st.endpoints.clear();
      st.jobs.clear();
      const now = Math.floor(Date.now() / 1000);
      const times = [];
      for (let k = 0; k < 240; k++) times.push(now - 3600 + 15 * k);
      const series = (f) => {
        const s = { throughput: times.map((_, k) => f(k)), queued: times.map(() => 3), running: times.map(() => 2), done: times.map(() => 1), failed: times.map(() => 0) };
        s.bytes = 15 * s.throughput.reduce((a, b) => a + b, 0);
        s.files_done = times.length;
        s.files_failed = 0;
        return s;
      };
      const hist = { from: new Date(1000 * times[0]).toISOString(), to: new Date(1000 * (now + 15)).toISOString(), step_seconds: 15, sample_seconds: 15, times, servers: ["synthetic"], endpoints: [], links: [] };
      for (let i = 0; i < nEndpoints; i++) {
        const name = "ep" + String(i).padStart(3, "0");
        const e = { name, url: "https://" + name, kind: "agent", up: i % 10 !== 9, throughput: 1e6 * (50 + i), peak_throughput: 2e8, cc: i % 32, max_cc: 32 };
        st.endpoints.set(name, e);
        hist.endpoints.push({ name, ...series((k) => 1e6 * (50 + i + 20 * Math.sin(k / 10))) });
      }
      hist.total = series((k) => 1e6 * 100 * nEndpoints);
      st.hist = hist;
      for (let i = 1; i <= nJobs; i++) {
        st.jobs.set(i, { id: i, owner: "user" + (i % 7), vo: "vo" + (i % 3), label: "synthetic " + i, class: i % 4 ? "interactive" : "batch", state: "active",
          files: 10, files_done: i % 10, files_failed: 0, files_canceled: 0, bytes: 1e10, bytes_done: (i % 100) * 1e8, throughput: 1e6 * (i % 50 + 1), eta_seconds: 100 + i, created: new Date().toISOString() });
      }
      location.hash = "#/overview";
      st.view = "overview";
      for (const v of document.querySelectorAll(".view")) v.hidden = v.id !== "view-overview";
      renderOverview();
    },
  };

  if (st.token) login(st.token);
  else $("token").focus();
})();
