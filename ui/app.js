// Corral's window: a hash router over small views. Everything an agent
// wrote is put into the page as text (textContent), never as HTML.

import * as runs from "./views/runs.js";
import * as run from "./views/run.js";
import * as presets from "./views/presets.js";
import * as launch from "./views/launch.js";
import * as timeline from "./views/timeline.js";

const invokeTauri = window.__TAURI__?.core?.invoke;

/** Calls one of Corral's commands. */
export async function call(command, args = {}) {
  if (!invokeTauri) throw new Error("not running inside the Corral app");
  return invokeTauri(command, args);
}

/** Builds an element; string children become text nodes, never HTML. */
export function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "class") node.className = value;
    // The CSP forbids style attributes; CSSOM properties are allowed.
    else if (key === "style") {
      for (const decl of String(value).split(";")) {
        const at = decl.indexOf(":");
        if (at > 0) node.style.setProperty(decl.slice(0, at).trim(), decl.slice(at + 1).trim());
      }
    }
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** Shows a message in the footer. */
export function say(message, isError = false) {
  const footer = document.getElementById("status");
  footer.textContent = message;
  footer.className = isError ? "error" : "";
}

/** A run's status; one whose agent is retrying a failing call says so. */
export function statusBadge(status, retrying = null) {
  return h("span", { class: `status s-${status}`, title: retrying ? `retrying: ${retrying}` : null },
    h("span", { class: "dot" }), status, retrying ? h("span", { class: "retrying" }, ` · retrying: ${retrying}`) : null);
}

export function ago(iso) {
  if (!iso) return "-";
  const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (s < 2) return "just now";
  if (s < 60) return `${Math.floor(s)}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86400)}d ago`;
}

export function duration(run) {
  if (!run.started_at) return "-";
  const end = run.completed_at ? Date.parse(run.completed_at) : (["completed", "failed", "aborted", "lost"].includes(run.status) ? null : Date.now());
  if (end === null) return "-";
  const ms = Math.max(0, end - Date.parse(run.started_at));
  const s = Math.floor(ms / 1000);
  if (ms < 1000) return `${ms}ms`;
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

export function tokens(run) {
  const u = run.usage;
  const total = u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_tokens;
  return total ? total.toLocaleString() : "-";
}

/** A run's cost; an estimate (the agent reported none) is marked "≈". */
export function cost(value, estimated = false) {
  if (value === null || value === undefined) return "-";
  const text = `$${value.toFixed(4)}`;
  return estimated ? h("span", { title: "estimated from its tokens and Corral's price table" }, `≈${text}`) : text;
}

export function isActive(status) {
  return ["queued", "starting", "running", "waiting", "paused"].includes(status);
}

const routes = { runs, run, presets, launch, timeline };
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
    a.classList.toggle("active", a.dataset.nav === route.name || (route.name === "run" && a.dataset.nav === "runs"));
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
  document.getElementById("counts").textContent = `${counts.running} running / ${counts.total} total`;
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
  const keys = { "1": "#/runs", "2": "#/timeline", "3": "#/presets", "4": "#/launch" };
  if (keys[e.key] && !e.ctrlKey && !e.metaKey && !e.altKey) location.hash = keys[e.key];
});
render();
follow();
