// Several runs reviewed together: the pairs that change the same lines
// (git's merge-tree of each pair, before anything is merged), then every
// file they changed, the files more than one run changed first, each
// run's diff of it under its name; Merge all, in the order chosen, once
// nothing conflicts.

import { call, h, say } from "../kit.js";
import { diffView } from "./changes.js";

let root = null;
let ids = [];

export async function show(view, _arg, params) {
  root = view;
  ids = (params?.get("runs") || "").split(",").filter(Boolean);
  view.append(h("div", { class: "toolbar" }, h("h1", { style: "margin:0" }, `Review ${ids.length} runs together`),
    h("span", { class: "muted" }, ids.join(" → "))), h("div", { id: "review-body" }, h("p", { class: "muted" }, "Trying them together…")));
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
  let together;
  try {
    together = await call("review_runs", { ids });
  } catch (e) {
    root.querySelector("#review-body").replaceChildren(h("p", { class: "error" }, String(e)));
    return;
  }
  const clashing = new Set(together.conflicts.flatMap((c) => c.files));
  // Runs with something left to merge (a merged run's changes are gone).
  const left = ids.filter((id) => together.files.some((f) => f.runs.some((r) => r.run === id)));
  // With pairs that clash, each run can still go alone: one of each pair,
  // and those that clash with nothing.
  const one = (id) => h("button", { class: "merge-one", "data-run": id, onclick: (e) => mergeSome(e, [id]) }, `Merge ${id}`);
  const notice = !left.length
    ? h("div", { class: "notice", id: "review-done" }, h("span", { class: "notice-words" }, "Nothing left to merge: each run is merged or changed nothing."))
    : together.conflicts.length
    ? h("div", { class: "notice failure", id: "review-conflicts" },
      h("span", { class: "notice-words" }, together.conflicts.map((c) => `${c.first} × ${c.second}: ${c.files.join(", ")}`).join("; "),
        ". Merge one of each pair, then reply to the other to redo its change on top."), ...left.map(one))
    : h("div", { class: "notice", id: "review-clean" }, h("span", { class: "notice-words" }, `No two of these runs change the same lines.`),
      h("button", { class: "primary", id: "merge-all", onclick: (e) => mergeSome(e, left) }, "Merge all, in this order"),
      left.length > 1 ? h("button", { id: "pr-all", onclick: (e) => pullRequestOf(e, left) }, "One pull request of all") : null);
  const files = together.files.map((file) => h("section", { class: "review-file", "data-path": file.path },
    h("h2", {}, clashing.has(file.path) ? h("span", { class: "chip need-failed" }, "conflict") : null, " ", file.path,
      h("span", { class: "muted" }, `  ${file.runs.map((r) => r.run).join(", ")}`)),
    file.runs.map((r) => h("div", { class: "review-run", "data-run": r.run },
      h("div", { class: "muted" }, `run ${r.run} (${r.preset})`), diffView({ path: file.path, patch: r.diff })))));
  root.querySelector("#review-body").replaceChildren(notice, ...files);
}

// Their work as one pull request, merged in this order (as `corral pr A B C`).
async function pullRequestOf(e, some) {
  e.currentTarget.disabled = true;
  try {
    const opened = await call("open_pull_request", { id: some[0], together: some.slice(1), draft: false });
    const name = opened.number == null ? opened.url : `${opened.forge === "gitlab" ? "!" : "#"}${opened.number}`;
    say(`${opened.opened ? "opened" : "pushed to"} ${name} of ${some.length} runs: ${opened.url}`);
  } catch (err) {
    say(String(err), true);
  }
  await refresh();
}

async function mergeSome(e, some) {
  e.currentTarget.disabled = true;
  try {
    const commits = await call("merge_runs", { ids: some });
    say(`merged ${commits.length} runs: ${commits.map((c) => c.slice(0, 12)).join(", ")}`);
  } catch (err) {
    say(String(err), true);
  }
  await refresh();
}
