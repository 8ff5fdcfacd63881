// Schedules: each with when it fires, its next fire, whether it is paused
// and why, and its latest fires with their runs; pause, resume, run now.

import { ago, call, h, say, when } from "../kit.js";

let root = null;

export async function show(view) {
  root = view;
  view.append(
    h("div", { class: "toolbar" }, h("h1", { style: "margin:0" }, "Schedules")),
    h("div", { id: "schedules-body" }),
  );
  await refresh();
}

export function leave() {
  root = null;
}

export function cares(change) {
  return change.statuses;
}

export async function refresh(change) {
  if (!root || (change && !change.statuses)) return;
  const schedules = await call("list_schedules");
  const body = root.querySelector("#schedules-body");
  if (!body) return;
  if (!schedules.length) {
    body.replaceChildren(h("p", {}, "No schedules. Add one with ",
      h("code", {}, "corral schedule add NAME --preset P --every 1d TASK"), ", or `schedule:` in a global preset."));
    return;
  }
  const problems = schedules[0].problems || [];
  body.replaceChildren(
    ...problems.map((p) => h("div", { class: "card problem" }, p)),
    h("div", { class: "cards" }, schedules.map(card)),
  );
}

function card(s) {
  const paused = !!s.paused_at;
  const next = paused ? "paused" : (s.next_fire ? `next ${when(s.next_fire)}` : "never again");
  const marks = s.fires.slice().reverse().map((f) => f.mark).join("");
  const fires = s.fires.map((f) => h("div", { class: "path", "data-fire": f.id },
    `${f.mark} ${when(f.due_at)} `,
    f.late_ms >= 1000 ? `(late by ${Math.round(f.late_ms / 1000)}s) ` : "",
    h("strong", {}, f.outcome), f.detail ? `: ${f.detail} ` : " ",
    ...f.runs.map((r) => h("a", { href: `#/run/${encodeURIComponent(r.id)}`, class: "fire-run" },
      `${r.id.slice(0, 8)} ${r.status ?? "removed"}`)),
  ));
  return h("div", { class: "card", "data-schedule": s.name },
    h("div", { class: "toolbar" },
      h("strong", {}, s.name), h("span", { class: "pill" }, s.preset),
      s.host ? h("span", { class: "pill" }, `on ${s.host}`) : null,
      h("span", {}, s.describe), h("span", { class: "pill", "data-next": "" }, next), h("span", { class: "marks" }, marks),
      h("span", { style: "flex:1" }),
      h("button", { "data-action": "run-now", onclick: () => act(() => call("run_schedule_now", { name: s.name })) }, "Run now"),
      h("button", { "data-action": paused ? "resume" : "pause",
        onclick: () => act(() => call("pause_schedule", { name: s.name, paused: !paused })) }, paused ? "Resume" : "Pause")),
    h("div", {}, s.task),
    paused ? h("div", { class: "path" }, `paused since ${ago(s.paused_at)}: ${s.paused_why || "by request"}`) : null,
    h("div", { class: "path" }, s.host ? `${s.cwd} on ${s.host}` : s.cwd),
    h("div", { class: "fires" }, fires.length ? fires : h("div", { class: "path" }, "no fires yet")),
  );
}

async function act(what) {
  try {
    await what();
    await refresh();
  } catch (e) {
    say(String(e), true);
  }
}
