// Corral's window: a hash router over small views. Everything an agent
// wrote is put into the page as text (textContent), never as HTML.

import * as runs from "./views/runs.js";
import * as run from "./views/run.js";
import * as presets from "./views/presets.js";
import * as launch from "./views/launch.js";
import * as timeline from "./views/timeline.js";
import * as schedules from "./views/schedules.js";
import * as review from "./views/review.js";
import { call, say } from "./kit.js";

const routes = { runs, run, presets, launch, timeline, schedules, review };
let current = null;

function parseHash() {
  const hash = location.hash.replace(/^#\/?/, "");
  const [path, query = ""] = hash.split("?");
  const [name = "runs", ...rest] = path.split("/");
  return { name: routes[name] ? name : "runs", arg: rest.join("/"), params: new URLSearchParams(query) };
}

async function render() {
  const route = parseHash();
  current?.leave?.();
  const view = document.getElementById("view");
  view.replaceChildren();
  for (const a of document.querySelectorAll("[data-nav]")) {
    a.classList.toggle("active", a.dataset.nav === route.name || (["run", "review"].includes(route.name) && a.dataset.nav === "runs"));
  }
  current = routes[route.name];
  try {
    await current.show(view, route.arg, route.params);
    say("");
  } catch (e) {
    say(String(e), true);
  }
}

function showCounts(counts) {
  // A paused run is not running: said apart.
  const paused = counts.paused ? ` · ${counts.paused} paused` : "";
  document.getElementById("counts").textContent = `${counts.running} running${paused} / ${counts.total} total`;
}

function showProblem(problem) {
  const banner = document.getElementById("banner");
  banner.hidden = !problem;
  banner.textContent = problem ? `Corral cannot read its store: ${problem}. Retrying every second.` : "";
}

// What changed, gathered until the next draw. A view that does not show
// what changed is not even asked to draw (no frame is requested: a
// software-rendered frame is not free). A status change is drawn in the
// next frame; a growing transcript at most every TRANSCRIPT_EVERY ms (4
// times a second: lively, and a quarter of the cost of every frame).
const TRANSCRIPT_EVERY = 250;
let pending = null;
let drawing = false;
let scheduled = null;
let drawnAt = 0;

function onStoreChanged(change) {
  const transcripts = new Set(change.transcripts);
  const statuses = !!change.counts;
  if (statuses) showCounts(change.counts);
  if (!current?.cares?.({ statuses, transcripts })) return;
  if (!pending) pending = { statuses: false, transcripts: new Set() };
  pending.statuses ||= statuses;
  for (const id of transcripts) pending.transcripts.add(id);
  schedule();
}

function schedule() {
  if (drawing || !pending) return;
  const wait = pending.statuses ? 0 : Math.max(0, drawnAt + TRANSCRIPT_EVERY - performance.now());
  if (scheduled !== null) {
    if (wait > 0) return;
    clearTimeout(scheduled);
  }
  scheduled = setTimeout(() => { scheduled = null; requestAnimationFrame(draw); }, wait);
}

async function draw() {
  if (drawing || !pending) return;
  const change = pending;
  pending = null;
  drawing = true;
  drawnAt = performance.now();
  try {
    await current?.refresh?.(change);
  } catch (e) {
    say(String(e), true);
  } finally {
    drawing = false;
    schedule();
  }
}

/** Follows the store: the app tells the window what changed. */
async function follow() {
  const listen = window.__TAURI__?.event?.listen;
  if (!listen) return;
  await listen("store-changed", (e) => onStoreChanged(e.payload));
  await listen("store-problem", (e) => showProblem(e.payload));
  call("counts").then(showCounts, (e) => say(String(e), true));
  call("store_problem").then(showProblem, () => {});
}

window.addEventListener("hashchange", render);
document.addEventListener("keydown", (e) => {
  if (e.target.matches("input, textarea, select")) return;
  const keys = { "1": "#/runs", "2": "#/timeline", "3": "#/presets", "4": "#/launch", "5": "#/schedules" };
  if (keys[e.key] && !e.ctrlKey && !e.metaKey && !e.altKey) location.hash = keys[e.key];
});
render();
follow();
