// The window's shared pieces: calling Corral's commands, building elements
// (text only, never HTML), and how a run's figures read. Every view
// imports them from here; this module imports no view, so the router
// (app.js) and the views never import each other in a circle.

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

/** Puts `children` in `node` in place of what it had; a missing child
 *  (null, false) is left out — DOM's own replaceChildren writes "null". */
export function fill(node, ...children) {
  node.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
}

/** Builds an SVG element (a chart's bars and labels); text as text. */
export function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, String(value));
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

/** A moment in local time, one format everywhere, as `corral` writes
 * times (24-hour, day before month): "27 Nov 2026, 05:03:12". */
export function when(iso) {
  if (!iso) return "-";
  return `${dayMonth(iso)} ${new Date(iso).getFullYear()}, ${clock(iso, true)}`;
}

/** The time of day, 24-hour: "19:30" (with seconds: "19:30:12"). */
export function clock(at, seconds = false) {
  return new Date(at).toLocaleTimeString("en-GB", { hour: "2-digit", minute: "2-digit", second: seconds ? "2-digit" : undefined, hourCycle: "h23" });
}

/** A day: "28 Nov". */
export function dayMonth(at) {
  return new Date(at).toLocaleDateString("en-GB", { day: "numeric", month: "short" });
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

/** Wall time from start to end (a paused run: to the moment it was frozen),
 * rounded to its last unit shown, as `corral` writes it (time::human_duration):
 * 850ms, 4.2s, 42s, 3m 05s, 2h 10m, 3d 4h. */
export function duration(run) {
  if (!run.started_at) return "-";
  let end = Date.now();
  if (run.completed_at) end = Date.parse(run.completed_at);
  else if (run.status === "paused" && run.paused_at) end = Date.parse(run.paused_at);
  else if (!isActive(run.status)) return "-";
  const ms = Math.max(0, end - Date.parse(run.started_at));
  const tenths = Math.round(ms / 100), s = Math.round(ms / 1000), m = Math.round(ms / 60000);
  const two = (n) => String(n).padStart(2, "0");
  if (ms < 1000) return `${ms}ms`;
  if (tenths < 100) return `${Math.floor(tenths / 10)}.${tenths % 10}s`;
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${two(s % 60)}s`;
  if (m < 1440) return `${Math.floor(m / 60)}h ${two(m % 60)}m`;
  return `${Math.floor(m / 1440)}d ${Math.floor((m % 1440) / 60)}h`;
}

/** A count as people read one: 950, 705k, 1.2M (the exact count on hover). */
export function count(n) {
  if (n < 1000) return String(n);
  if (n < 1e6) return `${Math.floor(n / 1000)}k`;
  return `${(n / 1e6).toFixed(1)}M`;
}

export function tokens(run) {
  const u = run.usage;
  const total = u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_tokens;
  return total ? h("span", { title: `${total.toLocaleString()} tokens` }, count(total)) : "-";
}

/** A run's cost in cents ($2.16; under a cent, $0.004); an estimate (the
 * agent reported none) is marked "≈". */
export function cost(value, estimated = false) {
  if (value === null || value === undefined) return "-";
  const text = value > 0 && value < 0.01 ? `$${value.toFixed(3)}` : `$${value.toFixed(2)}`;
  return estimated ? h("span", { title: "estimated from its tokens and Corral's price table" }, `≈${text}`) : text;
}

export function isActive(status) {
  return ["queued", "starting", "running", "waiting", "paused"].includes(status);
}
