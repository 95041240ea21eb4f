// Sluice dashboard: plain JavaScript, no build step.
//
// Third-party: uPlot 1.6.32 (https://github.com/leeoniya/uPlot), MIT
// licence (see LICENSE.uPlot beside this file), committed as
// uPlot.iife.min.js and uPlot.min.css from the npm package's dist/.
//
// Reads the REST API with the token kept in sessionStorage (every request
// sends "Authorization: Bearer TOKEN") and follows the server-sent event
// stream /v1/events with fetch() (EventSource cannot send headers); events
// update the jobs and refresh the endpoints, there is no polling loop.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const HOUR = 3600;
  const st = {
    token: sessionStorage.getItem("sluice.token") || "",
    me: null,
    jobs: new Map(), // id -> JobOut
    endpoints: new Map(), // name -> EndpointOut
    series: new Map(), // name -> {t: [], y: [], cc: []}
    charts: new Map(), // name -> uPlot
    detail: null, // {job, files}
    view: "overview",
    abort: null,
    synthetic: false,
    status: null, // StatusOut: scheduler, cycle, queues by class
    page: "", // the job page shown: "ID/FROM"
  };

  // ---- formatting ----
  const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
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
    s = Math.round(s);
    if (s < 60) return s + " s";
    if (s < 3600) return Math.floor(s / 60) + " min " + (s % 60) + " s";
    return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
  }
  const pct = (a, b) => (b > 0 ? Math.min(100, (100 * a) / b) : 0);
  function progress(done, total, label) {
    const p = pct(done, total);
    return `<progress max="100" value="${p.toFixed(1)}" aria-label="${esc(label)}"></progress> ${p.toFixed(0)}%`;
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
    $("who").textContent = `${st.me.name} (${st.me.vo}${st.me.admin ? ", admin" : ""})`;
    await Promise.all([loadJobs(), loadEndpoints()]).catch(showError);
    connect();
    route();
  }
  function logout(msg) {
    if (st.abort) st.abort.abort();
    st.abort = null;
    clearTimeout(epTimer);
    clearTimeout(filesTimer);
    epTimer = filesTimer = null;
    st.token = "";
    st.me = null;
    st.jobs.clear();
    st.endpoints.clear();
    st.series.clear();
    for (const c of st.charts.values()) c.destroy();
    st.charts.clear();
    st.detail = null;
    st.page = "";
    st.synthetic = false;
    live(false);
    $("live").textContent = "offline";
    sessionStorage.removeItem("sluice.token");
    $("endpoints").textContent = "";
    $("jobs").textContent = "";
    $("running").textContent = "";
    $("job-detail").textContent = "";
    $("allocations").textContent = "";
    for (const v of document.querySelectorAll(".view")) v.hidden = true;
    $("nav").hidden = true;
    $("session").hidden = true;
    $("login").hidden = false;
    $("login-error").textContent = msg || "";
    $("token").value = "";
    $("token").focus();
  }

  // ---- data ----
  // The jobs table holds the newest jobsPage jobs (of the state chosen)
  // and asks for the next older page when the user wants it: one request
  // of every job a user ever ran would grow without bound. jobsPage is a
  // variable so that tests can page a handful of jobs.
  let jobsPage = 500;
  async function loadJobs() {
    const state = $("job-state").value;
    const js = await api(`/v1/jobs?limit=${jobsPage}` + (state ? "&state=" + state : ""));
    st.jobs.clear();
    for (const j of js) st.jobs.set(j.id, j);
    st.jobsOlder = js.length === jobsPage;
    schedule();
  }
  async function loadOlderJobs() {
    const state = $("job-state").value;
    const before = Math.min(...st.jobs.keys());
    const js = await api(`/v1/jobs?limit=${jobsPage}&before=${before}` + (state ? "&state=" + state : ""));
    for (const j of js) st.jobs.set(j.id, j);
    st.jobsOlder = js.length === jobsPage;
    schedule();
  }
  async function loadJob(id) {
    try {
      const j = await api("/v1/jobs/" + id);
      st.jobs.set(j.id, j);
      if (st.detail && st.detail.job.id === j.id) st.detail.job = j;
      schedule();
    } catch (e) { /* not ours, or gone */ }
  }
  function addPoint(e, now) {
    let s = st.series.get(e.name);
    if (!s) { s = { t: [], y: [], cc: [] }; st.series.set(e.name, s); }
    s.t.push(now);
    s.y.push(e.throughput / 1e6);
    s.cc.push(e.cc);
    while (s.t.length && s.t[0] < now - HOUR) { s.t.shift(); s.y.shift(); s.cc.shift(); }
  }
  async function loadEndpoints() {
    const [es, status] = await Promise.all([api("/v1/endpoints"), api("/v1/status").catch(() => null)]);
    if (status) st.status = status;
    const now = Date.now() / 1000;
    st.endpoints.clear();
    for (const e of es) { st.endpoints.set(e.name, e); addPoint(e, now); }
    schedule();
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

  // ---- rendering ----
  let pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; render(); });
  }
  function render() {
    if (!st.me) return;
    if (st.view === "overview") renderOverview();
    else if (st.view === "jobs") renderJobs();
    else if (st.view === "job") renderDetail();
  }

  function activeJobs() {
    return [...st.jobs.values()].filter((j) => j.state === "active");
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
    const queues = s
      ? `<div class="card">Interactive files, queued / running<b>${s.interactive.queued} / ${s.interactive.running}</b></div>` +
        `<div class="card">Batch files, queued / running<b>${s.batch.queued} / ${s.batch.running}</b></div>` +
        `<div class="card">Scheduler<b>${esc(s.scheduler)}</b><span class="hint">cycle ${s.cycle_seconds < 0.001 ? (1e6 * s.cycle_seconds).toFixed(0) + " µs" : (1000 * s.cycle_seconds).toFixed(1) + " ms"} every ${(1000 * s.period_seconds).toFixed(0)} ms</span></div>`
      : "";
    $("summary").innerHTML =
      `<div class="card">Endpoints up<b>${up} / ${eps.length}</b></div>` + queues +
      `<div class="card">Active jobs, interactive<b>${by.interactive}</b></div>` +
      `<div class="card">Active jobs, batch<b>${by.batch}</b></div>` +
      `<div class="card">Concurrency<b>${cc}</b></div>` +
      `<div class="card">Throughput (listed jobs)<b>${rate(thr)}</b></div>`;
    renderEndpoints(eps);
    const rows = act.sort((a, b) => b.id - a.id).map((j) =>
      `<tr><td><a href="#/jobs/${j.id}">${j.id}</a></td><td>${esc(j.owner)}</td><td>${esc(j.class)}</td><td>${esc(j.label)}</td>` +
      `<td>${progress(j.bytes_done, j.bytes, "job " + j.id + " progress")}</td><td class="num">${rate(j.throughput)}</td><td class="num">${dur(j.eta_seconds)}</td></tr>`).join("");
    $("running").innerHTML = act.length
      ? `<table><caption class="hint">${act.length} active job${act.length === 1 ? "" : "s"}</caption><thead><tr><th scope="col">Job</th><th scope="col">Owner</th><th scope="col">Class</th><th scope="col">Label</th><th scope="col">Progress</th><th scope="col" class="num">Throughput</th><th scope="col" class="num">ETA</th></tr></thead><tbody>${rows}</tbody></table>`
      : `<p class="hint">Nothing running.</p>`;
  }

  let observer = null;
  function renderEndpoints(eps) {
    const box = $("endpoints");
    const seen = new Set();
    for (const e of eps) {
      seen.add(e.name);
      let card = box.querySelector(`[data-ep="${CSS.escape(e.name)}"]`);
      if (!card) {
        card = document.createElement("div");
        card.className = "card ep";
        card.dataset.ep = e.name;
        card.innerHTML = `<h4><span class="name"></span><span class="state"></span></h4><div class="stats"></div><div class="chart" role="img"></div>`;
        card.querySelector(".name").textContent = e.name;
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
      const ch = st.charts.get(e.name);
      const ser = st.series.get(e.name);
      if (ch && ser) ch.setData([ser.t, ser.y]);
    }
    for (const card of [...box.children]) {
      if (!seen.has(card.dataset.ep)) {
        const ch = st.charts.get(card.dataset.ep);
        if (ch) { ch.destroy(); st.charts.delete(card.dataset.ep); }
        observer.unobserve(card);
        card.remove();
      }
    }
  }
  // Charts are made when their card scrolls into view: 100 endpoints do
  // not cost 100 charts up front.
  function onVisible(entries) {
    for (const en of entries) {
      const name = en.target.dataset.ep;
      if (!en.isIntersecting || st.charts.has(name) || typeof uPlot === "undefined") continue;
      const el = en.target.querySelector(".chart");
      const ser = st.series.get(name) || { t: [], y: [] };
      const opts = {
        width: Math.max(260, el.clientWidth || 300), height: 130,
        legend: { show: false },
        scales: { x: { time: true, range: (u, min, max) => [Math.min(min ?? 0, (max ?? 0) - 60), max ?? 0] }, y: { range: (u, min, max) => [0, Math.max(1, max * 1.1)] } },
        axes: [{ stroke: "#1a1a1a", grid: { stroke: "#e2e6ea" } }, { stroke: "#1a1a1a", grid: { stroke: "#e2e6ea" }, size: 50, label: "MB/s", labelSize: 14 }],
        series: [{}, { label: "MB/s", stroke: "#0a4f8f", fill: "rgba(10,79,143,0.12)", width: 2, points: { show: true, size: 4 } }],
      };
      st.charts.set(name, new uPlot(opts, [ser.t, ser.y], el));
    }
  }

  function sortedJobs() {
    const state = $("job-state").value;
    return [...st.jobs.values()].filter((j) => !state || j.state === state).sort((a, b) => b.id - a.id);
  }
  function renderJobs() {
    const js = sortedJobs();
    const focused = document.activeElement && document.activeElement.dataset ? document.activeElement.dataset.job : null;
    const rows = js.map((j) =>
      `<tr><td><a href="#/jobs/${j.id}" data-job="${j.id}">${j.id}</a></td><td class="state-${esc(j.state)}">${esc(j.state)}</td><td>${esc(j.owner)}</td><td>${esc(j.label)}</td><td>${esc(j.class)}</td>` +
      `<td>${progress(j.bytes_done, j.bytes, "job " + j.id + " progress")} <span class="hint">${j.files_done}/${j.files} files</span></td>` +
      `<td class="num">${j.state === "active" ? rate(j.throughput) : "–"}</td><td class="num">${j.state === "active" ? dur(j.eta_seconds) : "–"}</td></tr>`).join("");
    $("jobs").innerHTML = js.length
      ? `<table id="jobs-table"><thead><tr><th scope="col">Job</th><th scope="col">State</th><th scope="col">Owner</th><th scope="col">Label</th><th scope="col">Class</th><th scope="col">Progress</th><th scope="col" class="num">Throughput</th><th scope="col" class="num">ETA</th></tr></thead><tbody>${rows}</tbody></table>`
      : `<p class="hint">No jobs.</p>`;
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
      `<tr><td class="num">${f.index}</td><td class="mono">${esc(f.source)}</td><td class="mono">${esc(f.destination)}</td><td class="state-${esc(f.state)}">${esc(f.state)}</td>` +
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

  // ---- routing ----
  function route() {
    if (!st.me) return;
    const h = location.hash.replace(/^#\/?/, "");
    const parts = h.split("/");
    let view = parts[0] || "overview";
    if (view === "jobs" && parts[1]) view = "job";
    if (!["overview", "jobs", "job", "allocations"].includes(view)) view = "overview";
    st.view = view;
    for (const v of document.querySelectorAll(".view")) v.hidden = v.id !== "view-" + view;
    for (const a of document.querySelectorAll("#nav a")) {
      if (a.dataset.view === view || (view === "job" && a.dataset.view === "jobs")) a.setAttribute("aria-current", "page");
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

  // Load measurement (used by the browser test): replaces the data with
  // nEndpoints synthetic endpoints and nJobs running jobs, stops the event
  // stream and renders the overview synchronously.
  window.sluiceDashboard = {
    // setJobsPage sets how many jobs the table asks for at a time and
    // reloads it (for tests).
    setJobsPage(n) {
      jobsPage = n;
      return loadJobs();
    },
    // points is how many samples an endpoint's chart holds (for tests).
    points(name) {
      const s = st.series.get(name);
      return s ? s.t.length : 0;
    },
    loadSynthetic(nEndpoints, nJobs) {
      st.synthetic = true;
      if (st.abort) st.abort.abort();
      $("live").textContent = "synthetic data";
      $("live").classList.remove("on");
      st.endpoints.clear();
      st.jobs.clear();
      const now = Date.now() / 1000;
      for (let i = 0; i < nEndpoints; i++) {
        const name = "ep" + String(i).padStart(3, "0");
        const e = { name, url: "https://" + name, up: i % 10 !== 9, throughput: 1e6 * (50 + i), peak_throughput: 2e8, cc: i % 32, max_cc: 32 };
        st.endpoints.set(name, e);
        const s = { t: [], y: [], cc: [] };
        for (let k = 0; k < 120; k++) { s.t.push(now - 120 + k); s.y.push(50 + i + 20 * Math.sin(k / 10)); s.cc.push(e.cc); }
        st.series.set(name, s);
      }
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
