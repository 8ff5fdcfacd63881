// The runs list: status, preset, machine (with hosts), task, age, duration,
// tokens, cost, with children nested under their parents; filter by status
// and machine; full-text search.

import { call, h, say, statusBadge, ago, duration, tokens, cost, clock, isActive } from "../kit.js";

/** Runs fetched per page: a store of thousands is never fetched whole. */
const PAGE = 200;

let state = { status: "", host: "", query: "", all: false, selected: 0, rows: [], limit: PAGE, endedSince: null, picked: [] };
let root = null;
let searchTimer = null;

export async function show(view, _arg, params) {
  root = view;
  // A summary notification opens the list filtered to what it spoke of.
  state.endedSince = params?.get("ended_since") || null;
  const search = h("input", {
    type: "search", id: "search", placeholder: "Search tasks, results, transcripts  ( / )", value: state.query, size: 40,
    oninput: (e) => { state.query = e.target.value; clearTimeout(searchTimer); searchTimer = setTimeout(refresh, 200); },
  });
  const filter = h("select", { id: "status-filter", onchange: (e) => { state.status = e.target.value; refresh(); } },
    ["", "queued", "starting", "running", "waiting", "paused", "completed", "failed", "aborted", "lost"].map((s) =>
      h("option", { value: s, selected: s === state.status }, s || "any status")));
  // Runs of other machines ([hosts.NAME] of config.toml), when there are any.
  const hosts = await call("list_hosts").catch(() => []);
  const machine = hosts.length
    ? h("select", { id: "host-filter", onchange: (e) => { state.host = e.target.value; refresh(); } },
      [["", "any machine"], ["local", "this machine"], ...hosts.map((name) => [name, name])].map(([value, label]) =>
        h("option", { value, selected: value === state.host }, label)))
    : null;
  const all = h("label", {}, h("input", { type: "checkbox", checked: state.all, onchange: (e) => { state.all = e.target.checked; refresh(); } }), " include cleared");
  const clear = h("button", { onclick: async () => { await call("clear_finished"); refresh(); } }, "Clear finished");
  const disk = h("span", { class: "muted", id: "worktrees-usage" });
  const since = state.endedSince
    ? h("span", { class: "pill", id: "ended-since" }, `ended since ${clock(state.endedSince, true)} `,
      h("a", { href: "#/runs" }, "show all"))
    : null;
  const together = h("button", { id: "review-together", onclick: () => { location.hash = `#/review?runs=${state.picked.join(",")}`; } });
  view.append(h("section", { id: "needs-you", hidden: true }), h("div", { class: "toolbar" }, search, filter, machine, all, clear, since, together, h("span", { style: "flex:1" }), disk), h("div", { id: "runs-table" }));
  showPicked();
  call("worktrees_usage").then((u) => {
    if (u.worktrees) disk.textContent = `${u.worktrees} worktree${u.worktrees === 1 ? "" : "s"} · ${size(u.bytes)} on disk`;
  }).catch(() => {});
  await refresh();
}

/** The name of the folder (or, for a worktree run, the repository) it ran in. */
function folderName(run) {
  const path = (run.worktree_repo ?? run.cwd).replace(/\/+$/, "");
  return path.slice(path.lastIndexOf("/") + 1) || path;
}

/** Runs picked to be reviewed together (their worktrees changed
 *  something), in the order picked: the button says how many. */
function pick(id, on) {
  state.picked = state.picked.filter((p) => p !== id);
  if (on) state.picked.push(id);
  showPicked();
}

function showPicked() {
  const button = root?.querySelector("#review-together");
  if (!button) return;
  // Its place is kept while hidden: ticking a box never moves the list
  // under the pointer (the next click would open a run).
  button.style.visibility = state.picked.length < 2 ? "hidden" : "visible";
  button.textContent = `Review ${state.picked.length} together`;
}

/** "+12 −3" for a run whose worktree changed something. */
function changeCounts(run) {
  const c = run.changes;
  if (run.worktree?.merged && !c?.files) return h("span", { class: "chip merged" }, "merged");
  if (!c || !c.files) return "";
  return [h("span", { class: "add" }, `+${c.added}`), " ", h("span", { class: "del" }, `−${c.removed}`)];
}

function size(bytes) {
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  while (bytes >= 1024 && i < units.length - 1) { bytes /= 1024; i++; }
  return `${bytes.toFixed(i ? 1 : 0)} ${units[i]}`;
}

export function leave() {
  root = null;
  clearInterval(ticker);
  ticker = null;
}

/** Runs at work that are listed: their transcripts growing means their
 * tokens and cost moved. */
let working = new Set();
/** When the list was last fetched for a run at work, and the fetch waiting. */
let liveAt = 0;
let liveTimer = null;
let listsAsked = 0;  // lists asked for so far (see refresh)
let needsAsked = 0;  // the same, for Needs you
/** How often, at most, runs at work are fetched again for their figures. */
const LIVE_EVERY = 2000;
/** Ages and durations tick once a second while the list is shown. */
let ticker = null;

function tick() {
  if (!root || document.hidden) return;
  root.querySelectorAll("#runs tbody tr").forEach((tr, i) => {
    const [run] = state.rows[i] ?? [];
    if (!run) return;
    setText(tr.querySelector(".age"), ago(run.created_at));
    if (isActive(run.status)) setText(tr.querySelector(".dur"), duration(run));
  });
}

/** Writes `text` into `cell` only if it says something else: a text
 *  written again is laid out and painted again (in software, not free). */
function setText(cell, text) {
  if (cell && cell.textContent !== text) cell.textContent = text;
}

/** The figures of runs at work, written into their rows in place (the
 *  same runs, in the same order): true if it could. */
function patchFigures(list) {
  const rows = asTree(list);
  if (rows.length !== state.rows.length || rows.some(([run], i) => run.id !== state.rows[i][0].id || run.status !== state.rows[i][0].status)) {
    return false;
  }
  const trs = root.querySelectorAll("#runs tbody tr");
  rows.forEach(([run], i) => {
    const tr = trs[i];
    if (!tr || !isActive(run.status)) return;
    setText(tr.querySelector(".dur"), duration(run));
    const [tok, price] = [tr.querySelector(".tok"), tr.querySelector(".cost")];
    const t = tokens(run), c = cost(run.cost_usd, run.cost_estimated);
    if (tok && tok.textContent !== (t.textContent ?? t)) tok.replaceChildren(t);
    if (price && price.textContent !== (c.textContent ?? c)) price.replaceChildren(c);
  });
  state.rows = rows;
  return true;
}

/** A run whose host cannot be followed: its last seen status, said so,
 * and why (with what to do) on hover. */
function unreachableBadge(run) {
  const since = clock(run.unreachable_since);
  const why = run.host_trouble ? `: ${run.host_trouble}` : "";
  return h("span", { class: "status s-unreachable", title: `${run.status} when last seen${why}` },
    h("span", { class: "dot" }),
    `${run.host} ${!run.host_trouble || run.host_trouble.includes("unreachable") ? "unreachable" : "not followed"} since ${since}`);
}

/** Parents first, each followed by its children, with their depth. */
function asTree(runs) {
  const byId = new Map(runs.map((r) => [r.id, r]));
  const out = [];
  const visit = (run, depth) => {
    out.push([run, depth]);
    for (const id of run.children) if (byId.has(id)) visit(byId.get(id), depth + 1);
  };
  for (const run of runs) if (!run.parent_id || !byId.has(run.parent_id)) visit(run, 0);
  return out;
}

/** A status changed, or a listed run at work wrote (its figures moved). */
export function cares(change) {
  return change.statuses || [...change.transcripts].some((id) => working.has(id));
}

/** "Needs you", pinned above the list: each item's reason as a chip, what
 * it is in words, and its actions as buttons (Open goes to the run). */
async function showNeeds() {
  const section = root?.querySelector("#needs-you");
  if (!section) return;
  let items, beyond;
  const mine = ++needsAsked;
  try {
    ({ items, beyond } = await call("needs"));
    if (mine !== needsAsked) return;
  } catch (e) {
    if (mine !== needsAsked) return;
    // Not known is said, never shown as "nothing needs you".
    section.hidden = false;
    section.replaceChildren(h("h2", {}, "Needs you"), h("div", { class: "need need-error" }, h("span", { class: "need-words" }, `cannot be read: ${e}`)));
    return;
  }
  // The whole count: what the list leaves out (older ended runs) is said.
  const total = items.length + beyond;
  section.hidden = !total;
  if (!total) { section.replaceChildren(); return; }
  const more = beyond ? h("div", { class: "need muted", id: "needs-more" },
    `and ${beyond} more, older: ended runs not looked at (Clear finished, or corral needs --dismiss RUN)`) : null;
  section.replaceChildren(h("h2", {}, `Needs you (${total})`), ...items.map((item) =>
    h("div", { class: `need need-${item.reason.kind}`, "data-id": item.id ?? item.name },
      h("span", { class: "chip" }, item.chip),
      // Its task too: failures of one preset read apart.
      h("span", { class: "need-words" }, item.words, item.task ? h("span", { class: "muted need-task" }, ` — ${item.task.split("\n")[0]}`) : null),
      h("span", { class: "need-actions" }, item.actions.map((action) =>
        h("button", {
          onclick: async () => {
            if (action.argv[0] === "show") { location.hash = `#/run/${action.argv[1]}`; return; }
            try { await call("act_on_need", { argv: action.argv }); say(`${action.label}: done`); } catch (e) { say(String(e), true); }
            refresh();
          },
        }, action.label))))), ...(more ? [more] : []));
}

/** Refetches the page when a status changed, and at most every
 * LIVE_EVERY ms while listed runs at work write (their tokens and cost). */
export async function refresh(change) {
  if (!root) return;
  if (change && !change.statuses) {
    const wait = liveAt + LIVE_EVERY - performance.now();
    if (wait > 0) {
      liveTimer ??= setTimeout(() => { liveTimer = null; refresh({ statuses: false, transcripts: new Set() }); }, wait);
      return;
    }
  } else {
    showNeeds();
  }
  liveAt = performance.now();
  ticker ??= setInterval(tick, 1000);
  // Lists are asked for from more than one place (a status change, the
  // live figures' timer, a filter): an answer that comes after a newer
  // one was asked for is older than it, and never drawn over it.
  const mine = ++listsAsked;
  const list = await call("list_runs", { status: state.status || null, host: state.host || null, query: state.query || null, all: state.all, limit: state.limit, endedSince: state.endedSince });
  if (mine !== listsAsked) return;
  const target = root.querySelector("#runs-table");
  if (!target) return;
  // Only figures moved (a run at work wrote): into their cells, in place.
  if (change && !change.statuses && patchFigures(list)) return;
  state.rows = asTree(list);
  working = new Set(list.filter((r) => isActive(r.status)).map((r) => r.id));
  if (!state.rows.length) {
    target.replaceChildren(h("div", { class: "empty" }, state.query || state.status ? "No runs match." : "No runs yet. Launch one from the Launch tab or with `corral launch PRESET TASK`."));
    return;
  }
  state.selected = Math.min(state.selected, state.rows.length - 1);
  // A machine column while any run listed is another host's.
  const remote = list.some((r) => r.host);
  const body = h("tbody", {}, state.rows.map(([run, depth], i) =>
    h("tr", { "data-id": run.id, class: i === state.selected ? "selected" : "", onclick: () => { location.hash = `#/run/${run.id}`; } },
      h("td", {}, depth ? h("span", { class: "indent" }, "\u00a0\u00a0".repeat(depth - 1) + "└─ ") : null, run.unreachable_since ? unreachableBadge(run) : statusBadge(run.status, run.retrying)),
      h("td", {}, run.preset),
      remote ? h("td", { class: "muted" }, run.host ?? "here") : null,
      h("td", { class: "muted", title: run.worktree_repo ?? run.cwd }, folderName(run)),
      h("td", { class: "task", title: run.task }, run.task),
      h("td", { class: "age" }, ago(run.created_at)),
      h("td", { class: "num dur" }, duration(run)),
      h("td", { class: "num tok" }, tokens(run)),
      h("td", { class: "num cost" }, cost(run.cost_usd, run.cost_estimated)),
      h("td", { class: "changes-cell" }, changeCounts(run),
        run.worktree && run.changes?.files ? h("input", { type: "checkbox", class: "pick", title: "review together", checked: state.picked.includes(run.id),
          onclick: (e) => { e.stopPropagation(); pick(run.id, e.target.checked); } }) : null),
      h("td", { class: "muted" }, run.id),
    )));
  const more = list.length === state.limit
    ? h("div", { class: "toolbar" }, h("button", { id: "more-runs", onclick: () => { state.limit += PAGE; refresh(); } }, `Show ${PAGE} more`))
    : null;
  target.replaceChildren(h("table", { id: "runs" },
    h("thead", {}, h("tr", {}, ["Status", "Preset", ...(remote ? ["Machine"] : []), "Folder", "Task", "Age", "Duration", "Tokens", "Cost", "Changes", "Id"].map((t) => h("th", {}, t)))),
    body), more ?? "");
}

document.addEventListener("keydown", (e) => {
  if (!root || e.target.matches("input, textarea, select")) {
    if (root && e.key === "Escape" && e.target.id === "search") e.target.blur();
    return;
  }
  if (e.key === "/") { e.preventDefault(); root.querySelector("#search")?.focus(); return; }
  if (!state.rows.length) return;
  if (e.key === "ArrowDown" || e.key === "j") state.selected = Math.min(state.rows.length - 1, state.selected + 1);
  else if (e.key === "ArrowUp" || e.key === "k") state.selected = Math.max(0, state.selected - 1);
  else if (e.key === "Enter") { location.hash = `#/run/${state.rows[state.selected][0].id}`; return; }
  else return;
  e.preventDefault();
  root.querySelectorAll("tbody tr").forEach((tr, i) => tr.classList.toggle("selected", i === state.selected));
  root.querySelectorAll("tbody tr")[state.selected]?.scrollIntoView({ block: "nearest" });
});
