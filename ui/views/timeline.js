// The timeline: runs as bars over the period chosen, children nested
// under their parents, colored by outcome, with `waiting` spans hatched;
// above it, what each preset spent per day over two weeks, as bars.

import { call, h, svg, isActive, count, cost, clock, dayMonth } from "../kit.js";

let root = null;
let hours = 6;

export async function show(view) {
  root = view;
  const range = h("select", { id: "timeline-range", onchange: (e) => { hours = Number(e.target.value); refresh(); } },
    [[1, "last hour"], [6, "last 6 hours"], [24, "last 24 hours"], [168, "last 7 days"]].map(([v, t]) => h("option", { value: v, selected: v === hours }, t)));
  view.append(h("div", { class: "toolbar" }, h("h1", { style: "margin:0" }, "Timeline"), h("span", { id: "today", class: "pill" })),
    h("section", { id: "spend" }),
    h("div", { class: "toolbar" }, h("h2", { style: "margin:0" }, "Runs"), range),
    h("div", { class: "legend" },
      h("span", { style: "--c: var(--run)" }, "running"), h("span", { style: "--c: var(--wait)" }, "waiting on children"),
      h("span", { class: "paused", style: "--c: var(--wait)" }, "paused"),
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
  const today = data.today;
  root.querySelector("#today").replaceChildren(`today: ${count(today.tokens)} tokens · `, cost(today.cost_usd), ` · ${today.cpu_seconds.toFixed(1)} CPU s`);
  root.querySelector("#spend").replaceChildren(spendChart(data.days, now));
  const body = root.querySelector("#timeline-body");
  if (!data.runs.length) {
    body.replaceChildren(h("div", { class: "empty" }, "No runs in this period."));
    return;
  }
  // The period chosen, whole: "last 6 hours" spans six hours.
  const start = Date.parse(data.since);
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
    // A run still active from before the period starts at its left edge.
    const begin = Math.max(start, Date.parse(run.started_at ?? run.created_at));
    const end = run.completed_at ? Date.parse(run.completed_at) : (isActive(run.status) ? now : begin);
    const track = h("div", { class: "tl-track" },
      h("div", { class: `tl-bar ${run.status}`, style: `left:${x(begin)};width:${width(begin, end)}`, title: barTitle(run) }));
    if (run.waiting_at) {
      const w = Math.max(start, Date.parse(run.waiting_at));
      const wEnd = run.status === "waiting" ? now : end;
      if (wEnd > w) track.append(h("div", { class: "tl-wait", style: `left:${x(w)};width:${width(w, wEnd)}`, title: "waiting on children" }));
    }
    return h("div", { class: "tl-row", "data-id": run.id },
      h("div", { class: "tl-label", style: `padding-left:${10 + depth * 16}px`, title: run.task, onclick: () => { location.hash = `#/run/${run.id}`; } },
        depth ? "└ " : "", `${run.preset} · `, h("span", { class: "muted" }, run.id)),
      track);
  });
  const precise = span < 10 * 60 * 1000;
  const fmt = (t) => clock(t, precise);
  const day = (t) => dayMonth(t);
  const label = (t) => (span > 24 * 3600 * 1000 ? `${day(t)} ${fmt(t)}` : fmt(t));
  body.replaceChildren(h("div", { class: "timeline" }, rows),
    h("div", { class: "tl-axis" }, h("span", {}, label(start)), h("span", {}, label(start + span / 2)), h("span", {}, "now")));
}

/** A bar's tooltip: status, id, and what the run's processes used. */
function barTitle(run) {
  const r = run.resources;
  if (!r) return `${run.status} ${run.id}`;
  const peak = r.memory_peak_bytes == null ? "" : `, peak ${(r.memory_peak_bytes / 1048576).toFixed(0)} MiB`;
  return `${run.status} ${run.id} · CPU ${r.cpu_seconds.toFixed(1)} s${peak}`;
}

const DAYS = 14;
const PALETTE = ["#1f6f50", "#1b4fd8", "#ef8f00", "#8e24aa", "#c62828", "#00838f", "#6d4c41", "#5c6bc0"];
const OTHERS = "#9e9e9e";

/** Spend per day for the last 14 days, one stacked bar per day, one color
 *  per preset (plain SVG). Dollars where any run has a cost; tokens where
 *  none does (an agent that reports none, a model without a price). */
function spendChart(days, now) {
  const dollars = days.some((d) => d.cost_usd > 0);
  const value = (d) => (dollars ? d.cost_usd : d.tokens);
  const said = (v) => (dollars ? `$${v.toFixed(2)}` : `${count(v)} tokens`);
  // The last 14 local days, oldest first, as the store names them.
  const dayKeys = [];
  for (let i = DAYS - 1; i >= 0; i--) {
    const d = new Date(now);
    d.setHours(12, 0, 0, 0);
    d.setDate(d.getDate() - i);
    dayKeys.push(`${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, "0")}-${String(d.getDate()).padStart(2, "0")}`);
  }
  // A colour each for the presets that spent most; past the palette, the
  // rest share one grey said as "others" (never a colour said twice).
  const spent = new Map();
  for (const d of days) spent.set(d.preset, (spent.get(d.preset) ?? 0) + value(d));
  const ranked = [...spent.keys()].sort((a, b) => spent.get(b) - spent.get(a) || a.localeCompare(b));
  const own = ranked.length > PALETTE.length ? ranked.slice(0, PALETTE.length - 1) : ranked;
  const others = ranked.slice(own.length);
  const color = new Map([...own.map((p, i) => [p, PALETTE[i]]), ...others.map((p) => [p, OTHERS])]);
  const presets = [...own].sort();
  const totals = dayKeys.map((k) => days.filter((d) => d.day === k).reduce((sum, d) => sum + value(d), 0));
  const top = Math.max(...totals, 0);
  const W = 700, H = 150, LEFT = 56, BOTTOM = 20, GAP = 6;
  const barW = (W - LEFT) / DAYS - GAP;
  const y = (v) => (top ? ((H - BOTTOM - 8) * v) / top : 0);
  const bars = dayKeys.flatMap((key, i) => {
    let base = H - BOTTOM;
    const xAt = LEFT + i * (barW + GAP);
    const parts = days.filter((d) => d.day === key && value(d) > 0).map((d) => {
      const hgt = Math.max(1, y(value(d)));
      base -= hgt;
      return svg("rect", { x: xAt, y: base, width: barW, height: hgt, fill: color.get(d.preset), class: "spend-bar", "data-day": key, "data-preset": d.preset },
        svg("title", {}, `${key} · ${d.preset}: ${said(value(d))}, ${d.runs} run${d.runs === 1 ? "" : "s"}`));
    });
    const tick = i % 2 === (DAYS - 1) % 2 ? svg("text", { x: xAt + barW / 2, y: H - 5, "text-anchor": "middle", class: "spend-axis" }, dayMonth(`${key}T12:00:00`)) : null;
    return [...parts, tick];
  });
  const grid = top ? [0.5, 1].map((f) => [
    svg("line", { x1: LEFT, x2: W, y1: H - BOTTOM - y(top * f), y2: H - BOTTOM - y(top * f), class: "spend-grid" }),
    svg("text", { x: LEFT - 6, y: H - BOTTOM - y(top * f) + 4, "text-anchor": "end", class: "spend-axis" }, said(top * f)),
  ]) : [];
  const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "spend-chart", role: "img", "aria-label": `spend per day, last ${DAYS} days` },
    grid, svg("line", { x1: LEFT, x2: W, y1: H - BOTTOM, y2: H - BOTTOM, class: "spend-grid" }), bars);
  const legend = h("div", { class: "legend" }, presets.map((p) => h("span", { style: `--c: ${color.get(p)}` }, p)),
    others.length ? h("span", { style: `--c: ${OTHERS}`, title: others.join(", ") }, `${others.length} others`) : null);
  const total = totals.reduce((a, b) => a + b, 0);
  return h("div", { class: "spend" },
    h("div", { class: "toolbar" }, h("h2", { style: "margin:0" }, `Spend per day, last ${DAYS} days`), h("span", { class: "muted", id: "spend-total" }, total ? `${said(total)} in all` : "nothing spent")),
    chart, ranked.length ? legend : null);
}
