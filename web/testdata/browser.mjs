// Drives the dashboard in Debian's chromium with playwright-core; run by
// web/browser_test.go, which starts the service and passes, in the
// environment: BASE_URL, ADMIN_TOKEN, USER_TOKEN, USER_NAME, DONE_JOB,
// HELD_JOB (active: its destination is down), USER_JOB, PAGED_JOB (150
// files, held), CHROMIUM, PW_DIR (where node_modules/playwright-core is)
// and OUT_DIR (screenshots).
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

const browser = await chromium.launch({ executablePath: env.CHROMIUM, args: ["--no-sandbox"] });
let page;
try {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  page = await ctx.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("dialog", (d) => d.accept());

  // Sign in as the admin.
  await page.goto(env.BASE_URL + "/");
  await page.getByLabel("API token").fill("not-a-token");
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByText("That token was refused.").waitFor();
  check(true, "a wrong token is refused");
  await page.getByLabel("API token").fill(env.ADMIN_TOKEN);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.locator("#who").getByText("admin").waitFor();
  check(true, "signed in as admin");

  // Overview: endpoint cards with charts that have data points.
  await page.locator('[data-ep="a1"] .uplot').waitFor();
  await page.waitForFunction(() => document.querySelectorAll('[data-ep="a1"] canvas').length > 0);
  check(await page.locator('[data-ep="a1"] .state.up').count() === 1, "a1 is up on the overview");
  check(await page.locator('[data-ep="a3"] .state.down').count() === 1, "a3 is down on the overview");
  await page.locator("#summary .card", { hasText: "Scheduler" }).waitFor();
  check(await page.locator("#summary .card", { hasText: "seal" }).count() === 1, "the overview names the scheduler and its cycle");
  await shot(page, "1-overview-admin");

  // Jobs table: all three jobs, keyboard navigation, detail.
  await page.getByRole("link", { name: "Jobs", exact: true }).click();
  for (const id of [env.DONE_JOB, env.HELD_JOB, env.USER_JOB]) {
    await page.locator(`#jobs a[data-job="${id}"]`).waitFor();
  }
  check(true, "the admin sees every job, the other user's included");
  check(await page.locator("#jobs tr", { hasText: "finished-job" }).locator(".state-done").count() === 1, "the finished job is done");
  await page.locator("#jobs a[data-job]").first().focus();
  await page.keyboard.press("ArrowDown");
  const second = await page.evaluate(() => document.activeElement.dataset.job);
  const ids = await page.locator("#jobs a[data-job]").evaluateAll((as) => as.map((a) => a.dataset.job));
  check(second === ids[1], "ArrowDown moves to the next row");
  await shot(page, "2-jobs-admin");
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
  await shot(page, "3-job-detail");

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
  await page.getByRole("link", { name: "Overview" }).click();
  await page.locator('[data-ep="a4"] .chart canvas').waitFor();
  let pts = 0;
  for (let i = 0; i < 40 && pts < 2; i++) { pts = await page.evaluate(() => window.sluiceDashboard.points("a4")); if (pts < 2) await page.waitForTimeout(250); }
  check(pts >= 2, `a4's chart is drawn with ${pts} data points`);
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
  await shot(page, "4-active-job");
  await cancel.click();
  await page.locator("#job-detail dd .state-canceled").waitFor();
  check(await cancel.count() === 0, "the active job is canceled from the page; the button is gone");
  // The cancel's events open the stream (the server sends its headers
  // with the first event).
  await page.locator("#live.on").waitFor({ timeout: 10000 });
  check(true, "the event stream is live");
  await shot(page, "5-canceled");

  // A job's files, a page at a time.
  await page.goto(env.BASE_URL + "/#/jobs/" + env.PAGED_JOB);
  await page.locator("#files-table tbody tr").first().waitFor();
  check(await page.locator("#files-table tbody tr").count() === 100, "a job of 150 files lists its first 100");
  await page.getByRole("link", { name: "Next 100" }).click();
  await page.locator("#files-table tbody tr td", { hasText: /^149$/ }).waitFor();
  check(await page.locator("#files-table tbody tr").count() === 50 && await page.getByRole("link", { name: "Next 100" }).count() === 0,
    "and the other 50 on the next page");

  // Allocations view (admin: usage too).
  await page.getByRole("link", { name: "Allocations" }).click();
  await page.getByRole("heading", { name: "Streams per pair" }).waitFor();
  check(true, "the allocations view shows the policy usage");

  // Another user sees only their own job.
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.getByLabel("API token").fill(env.USER_TOKEN);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.locator("#who").getByText(env.USER_NAME).waitFor();
  await page.getByRole("link", { name: "Jobs", exact: true }).click();
  await page.locator(`#jobs a[data-job="${env.USER_JOB}"]`).waitFor();
  check(await page.locator(`#jobs a[data-job="${env.DONE_JOB}"], #jobs a[data-job="${env.HELD_JOB}"]`).count() === 0,
    `${env.USER_NAME} sees her job and not the admin's`);
  await page.goto(env.BASE_URL + "/#/jobs/" + env.DONE_JOB);
  await page.locator("#job-detail .error").waitFor();
  check(true, `${env.USER_NAME} cannot open the admin's job`);
  await shot(page, "6-jobs-user");

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
  await shot(page, "7-overview-load", false);
  check(errors.length === 0, "no page errors" + (errors.length ? ": " + errors.join("; ") : ""));
} catch (e) {
  console.log(String(e && e.stack || e));
  if (page) await shot(page, "failure").catch(() => {});
  await browser.close();
  process.exit(1);
}
await browser.close();
