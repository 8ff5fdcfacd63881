// The timeline: runs as bars over time, children nested under their
// parents, colored by outcome, with `waiting` spans hatched; today's
// tokens and cost above it.

import { call, h, isActive } from "../kit.js";

let root = null;
let hours = 6;

export async function show(view) {
  root = view;
  const range = h("select", { id: "timeline-range", onchange: (e) => { hours = Number(e.target.value); refresh(); } },
    [[1, "last hour"], [6, "last 6 hours"], [24, "last 24 hours"], [168, "last 7 days"]].map(([v, t]) => h("option", { value: v, selected: v === hours }, t)));
  view.append(h("div", { class: "toolbar" }, h("h1", { style: "margin:0" }, "Timeline"), range, h("span", { id: "today", class: "pill" })),
    h("div", { class: "legend" },
      h("span", { style: "--c: var(--run)" }, "running"), h("span", { style: "--c: var(--wait)" }, "waiting on children"),
      h("span", { style: "--c: var(--ok)" }, "completed"), h("span", { style: "--c: var(--fail)" }, "failed"),
      h("span", { style: "--c: var(--abort)" }, "aborted"), h("span", { style: "--c: var(--lost)" }, "lost")),
    h("div", { id: "timeline-body" }));
  await refresh();
}

export function leave() {
  root = null;
}

export function cares(change) {
  return change.statuses;
}

export async function refresh(change) {
  if (change && !change.statuses) return;
  if (!root) return;
  const data = await call("timeline", { hours });
  const now = Date.parse(data.now);
  root.querySelector("#today").textContent = `today: ${data.today.tokens.toLocaleString()} tokens, $${data.today.cost_usd.toFixed(4)}, ${data.today.cpu_seconds.toFixed(1)} CPU s`;
  const body = root.querySelector("#timeline-body");
  if (!data.runs.length) {
    body.replaceChildren(h("div", { class: "empty" }, "No runs in this period."));
    return;
  }
  const start = Math.min(...data.runs.map((r) => Date.parse(r.started_at ?? r.created_at)));
  const span = Math.max(1000, now - start);
  const x = (t) => `${(100 * (t - start)) / span}%`;
  const width = (a, b) => `${Math.max(0.2, (100 * (b - a)) / span)}%`;
  const byId = new Map(data.runs.map((r) => [r.id, r]));
  const ordered = [];
  const visit = (run, depth) => {
    ordered.push([run, depth]);
    for (const id of run.children) if (byId.has(id)) visit(byId.get(id), depth + 1);
  };
  for (const run of data.runs) if (!run.parent_id || !byId.has(run.parent_id)) visit(run, 0);

  const rows = ordered.map(([run, depth]) => {
    const begin = Date.parse(run.started_at ?? run.created_at);
    const end = run.completed_at ? Date.parse(run.completed_at) : (isActive(run.status) ? now : begin);
    const track = h("div", { class: "tl-track" },
      h("div", { class: `tl-bar ${run.status}`, style: `left:${x(begin)};width:${width(begin, end)}`, title: barTitle(run) }));
    if (run.waiting_at) {
      const w = Date.parse(run.waiting_at);
      const wEnd = run.status === "waiting" ? now : end;
      if (wEnd > w) track.append(h("div", { class: "tl-wait", style: `left:${x(w)};width:${width(w, wEnd)}`, title: "waiting on children" }));
    }
    return h("div", { class: "tl-row", "data-id": run.id },
      h("div", { class: "tl-label", style: `padding-left:${10 + depth * 16}px`, title: run.task, onclick: () => { location.hash = `#/run/${run.id}`; } },
        depth ? "└ " : "", `${run.preset} · `, h("span", { class: "muted" }, run.id)),
      track);
  });
  const precise = span < 10 * 60 * 1000;
  const fmt = (t) => new Date(t).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: precise ? "2-digit" : undefined });
  body.replaceChildren(h("div", { class: "timeline" }, rows),
    h("div", { class: "tl-axis" }, h("span", {}, fmt(start)), h("span", {}, fmt(start + span / 2)), h("span", {}, "now")));
}

/** A bar's tooltip: status, id, and what the run's processes used. */
function barTitle(run) {
  const r = run.resources;
  if (!r) return `${run.status} ${run.id}`;
  const peak = r.memory_peak_bytes == null ? "" : `, peak ${(r.memory_peak_bytes / 1048576).toFixed(0)} MiB`;
  return `${run.status} ${run.id} · CPU ${r.cpu_seconds.toFixed(1)} s${peak}`;
}
