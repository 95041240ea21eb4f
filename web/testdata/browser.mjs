// Drives the dashboard in Debian's chromium with playwright-core; run by
// web/browser_test.go, which starts the service and passes, in the
// environment: BASE_URL, ADMIN_TOKEN, USER_TOKEN, USER_NAME, DONE_JOB,
// HELD_JOB (active: its destination is down), USER_JOB, PAGED_JOB (150
// files, held), RUNNING_JOB, MIXED_JOB (4 files done, 1 failed, 1
// running), CHROMIUM, PW_DIR (where node_modules/playwright-core is) and
// OUT_DIR (screenshots).
import { createRequire } from "node:module";
import path from "node:path";

const env = process.env;
const require = createRequire(path.join(env.PW_DIR, "package.json"));
const { chromium } = require("playwright-core");

const shot = (page, name, fullPage = true) => page.screenshot({ path: path.join(env.OUT_DIR, name + ".png"), fullPage });
function check(ok, what) {
  if (!ok) throw new Error("FAIL: " + what);
  console.log("ok: " + what);
}

// Every request the pages make, to check that none leaves the machine.
const requests = [];
const local = (u) => {
  const url = new URL(u);
  if (url.protocol === "data:" || url.protocol === "blob:" || url.protocol === "about:") return true;
  return ["127.0.0.1", "localhost", "[::1]"].includes(url.hostname) || /^127\./.test(url.hostname);
};

const browser = await chromium.launch({ executablePath: env.CHROMIUM, args: ["--no-sandbox"] });
let page;
try {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  ctx.on("request", (r) => requests.push(r.url()));
  page = await ctx.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("dialog", (d) => d.accept());
  const go = (hash) => page.evaluate((h) => { location.hash = h; }, hash);

  // Signed out: the sign-in form alone, no session bar (a CSS rule once
  // overrode hidden and showed "offline" and "Sign out").
  await page.goto(env.BASE_URL + "/");
  await page.getByLabel("API token").waitFor();
  check(!(await page.getByRole("button", { name: "Sign out" }).isVisible()) && !(await page.locator("#live").isVisible()) &&
    !(await page.locator("#filters").isVisible()) && !(await page.locator("#nav").isVisible()),
    "signed out: no Sign out button, no connection state, no filters, no views");
  await page.getByLabel("API token").fill("not-a-token");
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByText("That token was refused.").waitFor();
  check(true, "a wrong token is refused");
  await page.getByLabel("API token").fill(env.ADMIN_TOKEN);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.locator("#who").getByText("admin").waitFor();
  check(await page.getByRole("button", { name: "Sign out" }).isVisible(), "signed in as admin, with a Sign out button");

  // The history: samples every second. Charts over the last 15 minutes.
  await page.getByLabel("Last").selectOption("900");
  let pts = 0;
  for (let i = 0; i < 120 && pts < 15; i++) {
    await page.evaluate(() => window.sluiceDashboard.history());
    pts = await page.evaluate(() => window.sluiceDashboard.points("a4"));
    if (pts < 15) await page.waitForTimeout(250);
  }
  check(pts >= 15, `a4's throughput history has ${pts} samples`);

  // Overview: endpoint cards with history charts, the totals' charts.
  await page.locator('[data-ep="a1"] .uplot').waitFor();
  check(await page.locator('[data-ep="a1"] .state.up').count() === 1, "a1 is up on the overview");
  check(await page.locator('[data-ep="a3"] .state.down').count() === 1, "a3 is down on the overview");
  await page.locator("#summary .card", { hasText: "Scheduler" }).waitFor();
  check(await page.locator("#summary .card", { hasText: "seal" }).count() === 1, "the overview names the scheduler and its cycle");
  for (const id of ["ov-thr", "ov-files", "ov-ends"]) await page.locator(`#${id} canvas`).waitFor();
  check(true, "the overview charts throughput, files queued and running, files done and failed");
  await page.locator("#summary .card", { hasText: "Failed in the range" }).locator("b", { hasText: /^[1-9]/ }).waitFor();
  check(true, "the overview counts the failed file in the range");
  // A chart survives a reload: it is the store's history, not the page's.
  await page.reload();
  await page.locator("#who").getByText("admin").waitFor();
  await page.getByLabel("Last").selectOption("900");
  let after = 0;
  for (let i = 0; i < 40 && after < pts; i++) { after = await page.evaluate(() => window.sluiceDashboard.points("a4")); if (after < pts) await page.waitForTimeout(250); }
  check(after >= pts, `after a reload a4's chart still has its ${after} samples (${pts} before)`);
  await page.locator('[data-ep="a4"] .chart canvas').waitFor();
  await page.waitForTimeout(300); // the last frame of the charts
  await shot(page, "console-01-overview");

  // Links, and one link's charts and failures.
  await page.getByRole("link", { name: "Links", exact: true }).click();
  await page.locator("#links-table").getByRole("link", { name: "a4 → a2" }).waitFor();
  check(await page.locator("#links-table").getByRole("link", { name: "a1 → a3" }).count() === 1, "the links view lists a4 → a2 and the held a1 → a3");
  await shot(page, "console-02-links");
  await page.locator("#links-table").getByRole("link", { name: "a1 → a2" }).click();
  await page.getByRole("heading", { name: "Link a1 → a2" }).waitFor();
  for (const id of ["d-thr", "d-files", "d-ends"]) await page.locator(`#${id} canvas`).waitFor();
  await page.locator("#detail-failures td.reason").first().waitFor();
  check(/checksum/i.test(await page.locator("#detail-failures td.reason").first().textContent()), "the link's failures say why: the checksum");
  await page.waitForTimeout(300);
  await shot(page, "console-03-link");

  // Failures: the failed file with its reason, linking to its job at it.
  await page.getByRole("link", { name: "Failures" }).click();
  const frow = page.locator("#failures .failures-table tbody tr", { hasText: "mixed-job" });
  await frow.first().waitFor();
  check(await frow.count() === 1 && /checksum/i.test(await frow.locator("td.reason").textContent()), "the failures panel lists the mixed job's failed file and why");
  await shot(page, "console-04-failures");
  await frow.getByRole("link", { name: `job ${env.MIXED_JOB} #4` }).click();
  await page.locator("#files-table tbody tr.hit").waitFor();
  check(/failed/.test(await page.locator("#files-table tbody tr.hit").textContent()), "the failure opens its job at the failed file");

  // Endpoints: state, capacity, load; one endpoint's view.
  await page.getByRole("link", { name: "Endpoints", exact: true }).click();
  const eprow = page.locator("#endpoints-table tbody tr", { hasText: "a4" });
  await eprow.waitFor();
  check(await page.locator("#endpoints-table tbody tr", { hasText: "a3" }).locator(".pill.down").count() === 1 &&
    await eprow.locator(".pill.up").count() === 1, "the endpoints page shows a3 down and a4 up");
  check(/learned|configured/.test(await eprow.textContent()), "with a4's capacity and where it comes from");
  await shot(page, "console-05-endpoints");
  await page.locator("#endpoints-table").getByRole("link", { name: "a2", exact: true }).click();
  await page.getByRole("heading", { name: "Endpoint a2" }).waitFor();
  await page.locator("#d-thr canvas").waitFor();
  await page.locator("#detail-links").getByRole("link", { name: "a4 → a2" }).waitFor();
  check(true, "an endpoint's view charts it and lists its links");
  await page.waitForTimeout(300);
  await shot(page, "console-06-endpoint");

  // Jobs table: all jobs, keyboard navigation, detail.
  await page.getByRole("link", { name: "Jobs", exact: true }).click();
  for (const id of [env.DONE_JOB, env.HELD_JOB, env.USER_JOB, env.MIXED_JOB]) {
    await page.locator(`#jobs a[data-job="${id}"]`).waitFor();
  }
  check(true, "the admin sees every job, the other user's included");
  check(await page.locator("#jobs tr", { hasText: "finished-job" }).locator(".state-done").count() === 1, "the finished job is done");
  await page.locator("#jobs a[data-job]").first().focus();
  await page.keyboard.press("ArrowDown");
  const second = await page.evaluate(() => document.activeElement.dataset.job);
  const ids = await page.locator("#jobs a[data-job]").evaluateAll((as) => as.map((a) => a.dataset.job));
  check(second === ids[1], "ArrowDown moves to the next row");
  await shot(page, "console-07-jobs");
  // Filters: one user's jobs; a search of the labels.
  await page.getByLabel("User").fill(env.USER_NAME);
  await page.getByLabel("User").press("Enter");
  await page.waitForFunction((id) => document.querySelectorAll("#jobs a[data-job]").length === 1 && document.querySelector(`#jobs a[data-job="${id}"]`), env.USER_JOB);
  check(await page.locator(`#jobs a[data-job="${env.USER_JOB}"]`).count() === 1, `the user filter shows ${env.USER_NAME}'s job only`);
  await page.getByRole("button", { name: "Clear" }).click();
  await page.getByLabel("Search").fill("MIXED");
  await page.waitForFunction((id) => document.querySelectorAll("#jobs a[data-job]").length === 1 && document.querySelector(`#jobs a[data-job="${id}"]`), env.MIXED_JOB);
  check(await page.locator(`#jobs a[data-job="${env.MIXED_JOB}"]`).count() === 1, "the search box finds the mixed job by its label");
  await page.getByRole("button", { name: "Clear" }).click();
  await page.waitForFunction((n) => document.querySelectorAll("#jobs a[data-job]").length === n, ids.length);
  // Older jobs a page at a time (two jobs a page here).
  const all = ids.length;
  await page.evaluate(() => window.sluiceDashboard.setJobsPage(2));
  await page.waitForFunction(() => document.querySelectorAll("#jobs a[data-job]").length === 2);
  let older = page.getByRole("button", { name: "Show 2 older jobs" });
  for (let i = 0; i < all && await older.count() > 0; i++) {
    const n = await page.locator("#jobs a[data-job]").count();
    await older.click();
    await page.waitForFunction((n) => document.querySelectorAll("#jobs a[data-job]").length > n || !document.getElementById("jobs-older"), n);
  }
  const paged = await page.locator("#jobs a[data-job]").evaluateAll((as) => as.map((a) => a.dataset.job));
  check(paged.length === all && paged.every((id, i) => id === ids[i]), `older jobs two at a time: ${paged.length} of ${all}, newest first`);
  await page.evaluate(() => window.sluiceDashboard.setJobsPage(500));
  await page.locator(`#jobs a[data-job="${env.DONE_JOB}"]`).focus();
  await page.keyboard.press("Enter");
  await page.locator("#files-table tbody tr").first().waitFor();
  const rows = await page.locator("#files-table tbody tr").count();
  check(rows === 4, `the finished job's detail lists its 4 files (${rows})`);
  check(await page.locator("#files-table .state-done").count() === 4, "its files are done");
  check(await page.locator("#files-table td.mono", { hasText: "adler32:" }).count() === 4, "with their checksums");
  // The mixed job's page: done, failed and running files.
  await go("#/jobs/" + env.MIXED_JOB);
  await page.locator("#files-table .state-running").waitFor();
  check(await page.locator("#files-table .state-done").count() === 4 && await page.locator("#files-table .state-failed").count() === 1,
    "the mixed job's page shows 4 files done, 1 failed and 1 running");
  await shot(page, "console-08-job");

  // A running job's progress advances on the page (events, no reload),
  // then it is cancelled from its page.
  await page.getByRole("link", { name: "Jobs", exact: true }).click();
  const bar = page.locator(`#jobs tr:has(a[data-job="${env.RUNNING_JOB}"]) progress`);
  await bar.waitFor();
  const at = async () => Number(await bar.getAttribute("value"));
  let first = await at();
  for (let i = 0; i < 120 && first <= 0; i++) { await page.waitForTimeout(250); first = await at(); }
  // Progress counts written sub-writes (16 MiB to an agent): at 8 MB/s
  // shared by up to four partial transfers the next one lands within 10 s.
  let later = first;
  for (let i = 0; i < 120 && later <= first; i++) { await page.waitForTimeout(250); later = await at(); }
  check(first > 0 && later > first && later < 100, `the running job's progress advances (${first.toFixed(1)}% -> ${later.toFixed(1)}%)`);
  await page.goto(env.BASE_URL + "/#/jobs/" + env.RUNNING_JOB);
  const stop = page.getByRole("button", { name: `Cancel job ${env.RUNNING_JOB}` });
  await stop.waitFor();
  await stop.click();
  await page.locator("#job-detail dd .state-canceled").waitFor();
  check(true, "the running job is canceled from its page");

  // Cancel the held job from its page.
  await page.goto(env.BASE_URL + "/#/jobs/" + env.HELD_JOB);
  const cancel = page.getByRole("button", { name: `Cancel job ${env.HELD_JOB}` });
  await cancel.waitFor();
  await cancel.click();
  await page.locator("#job-detail dd .state-canceled").waitFor();
  check(await cancel.count() === 0, "the active job is canceled from the page; the button is gone");
  // The cancel's events open the stream (the server sends its headers
  // with the first event).
  await page.locator("#live.on").waitFor({ timeout: 10000 });
  check(true, "the event stream is live");

  // A job's files, a page at a time.
  await page.goto(env.BASE_URL + "/#/jobs/" + env.PAGED_JOB);
  await page.locator("#files-table tbody tr").first().waitFor();
  check(await page.locator("#files-table tbody tr").count() === 100, "a job of 150 files lists its first 100");
  await page.getByRole("link", { name: "Next 100" }).click();
  await page.locator("#files-table tbody tr td", { hasText: /^149$/ }).waitFor();
  check(await page.locator("#files-table tbody tr").count() === 50 && await page.getByRole("link", { name: "Next 100" }).count() === 0,
    "and the other 50 on the next page");

  // Submit: the estimate first, then the job.
  await page.getByRole("link", { name: "Submit" }).click();
  check(await page.getByRole("button", { name: "Submit" }).isDisabled(), "submit waits for an estimate");
  await page.getByLabel(/Files, one per line/).fill("sluice://a1/fin/00 sluice://a2/submitted/00 256KiB\nsluice://a1/fin/01 sluice://a2/submitted/01 256KiB");
  await page.getByLabel("Label").fill("from-the-form");
  await page.getByRole("button", { name: "Estimate" }).click();
  const est = page.locator("#estimate-table tbody tr", { hasText: "a1 → a2" });
  await est.waitFor({ timeout: 30000 });
  check(/\d+ kB|MB|GB/.test(await est.textContent()) && await page.getByRole("button", { name: "Submit" }).isEnabled(),
    "the estimate shows streams, throughput and time for a1 → a2 before submitting: " + (await est.textContent()).replace(/\s+/g, " "));
  await shot(page, "console-09-submit");
  await page.getByRole("button", { name: "Submit" }).click();
  await page.getByRole("heading", { name: /from-the-form/ }).waitFor();
  await page.locator("#job-detail dd .state-done").waitFor({ timeout: 20000 });
  check(true, "the job submitted from the form is done");

  // Allocations view (admin: usage too).
  await page.getByRole("link", { name: "Allocations" }).click();
  await page.getByRole("heading", { name: "Streams per pair" }).waitFor();
  check(true, "the allocations view shows the policy usage");

  // The API reference, from the binary.
  await page.goto(env.BASE_URL + "/docs");
  await page.locator(".opblock-summary-path", { hasText: "/v1/history" }).first().waitFor({ timeout: 20000 });
  check(await page.locator(".opblock-summary-path", { hasText: "/v1/jobs" }).count() > 0, "the API reference at /docs lists the operations");
  await shot(page, "console-10-docs", false);

  // Another user sees only their own job.
  await page.goto(env.BASE_URL + "/");
  await page.getByRole("button", { name: "Sign out" }).click();
  check(!(await page.getByRole("button", { name: "Sign out" }).isVisible()) && !(await page.locator("#live").isVisible()), "signed out again: no session bar");
  await page.getByLabel("API token").fill(env.USER_TOKEN);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.locator("#who").getByText(env.USER_NAME).waitFor();
  check(!(await page.locator("#f-user").isVisible()), "a user has no user and VO filters");
  await page.getByRole("link", { name: "Jobs", exact: true }).click();
  await page.locator(`#jobs a[data-job="${env.USER_JOB}"]`).waitFor();
  check(await page.locator(`#jobs a[data-job="${env.DONE_JOB}"], #jobs a[data-job="${env.HELD_JOB}"]`).count() === 0,
    `${env.USER_NAME} sees her job and not the admin's`);
  await page.getByRole("link", { name: "Failures" }).click();
  await page.locator("#failures .hint", { hasText: "No failed files." }).waitFor();
  check(true, `${env.USER_NAME} sees none of the admin's failures`);
  await page.goto(env.BASE_URL + "/#/jobs/" + env.DONE_JOB);
  await page.locator("#job-detail .error").waitFor();
  check(true, `${env.USER_NAME} cannot open the admin's job`);

  // Load: 100 endpoints and 1,000 running jobs on the overview.
  const ms = await page.evaluate(async () => {
    const t0 = performance.now();
    window.sluiceDashboard.loadSynthetic(100, 1000);
    await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
    return performance.now() - t0;
  });
  check(await page.locator("#endpoints .ep").count() === 100, "100 endpoint cards");
  check(await page.locator("#running tbody tr").count() === 1000, "1,000 running jobs listed");
  check(ms < 2000, `the overview rendered 100 endpoints and 1,000 running jobs in ${ms.toFixed(0)} ms (< 2000)`);
  // Still responsive: the charts in view are drawn and a view switch is quick.
  await page.waitForFunction(() => document.querySelectorAll("#endpoints .uplot").length > 0);
  const sw = await page.evaluate(async () => {
    const t0 = performance.now();
    location.hash = "#/jobs";
    await new Promise((r) => setTimeout(r, 0));
    await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
    return performance.now() - t0;
  });
  check(await page.locator("#jobs tbody tr").count() === 1000, "the jobs table lists the 1,000 jobs");
  check(sw < 2000, `switching to the jobs table with 1,000 rows took ${sw.toFixed(0)} ms (< 2000)`);
  await page.evaluate(() => { location.hash = "#/overview"; });
  await shot(page, "overview-load", false);
  check(errors.length === 0, "no page errors" + (errors.length ? ": " + errors.join("; ") : ""));
  const away = requests.filter((u) => !local(u));
  check(requests.length > 0 && away.length === 0, `${requests.length} requests, none leaving the machine` + (away.length ? ": " + away.slice(0, 5).join(", ") : ""));
} catch (e) {
  console.log(String(e && e.stack || e));
  if (page) await shot(page, "failure").catch(() => {});
  await browser.close();
  process.exit(1);
}
await browser.close();
