// The launch form: machine (this one, or a host of config.toml), preset,
// task, folder (with a picker here; changing it finds that project's
// presets), model override, a budget, and a git worktree of its own (the
// preset's choice by default).

import { call, h, say } from "../kit.js";

let root = null;

export async function show(view, _arg, params) {
  root = view;
  const folders = await call("recent_folders");
  const hosts = await call("list_hosts");
  const hostSelect = h("select", { id: "launch-host", onchange: () => {
    const remote = Boolean(hostSelect.value);
    pick.disabled = remote;
    cwdInput.placeholder = remote ? `a folder on ${hostSelect.value} (default: its home)` : "/path/to/project";
    if (remote) cwdInput.value = "";
    loadPresets();
  } }, h("option", { value: "" }, "this machine"), hosts.map((name) => h("option", { value: name, selected: name === params.get("host") }, name)));
  const cwd = params.get("cwd") || folders[0] || "";
  // The preset asked for (a card's Launch…), else the one launched last.
  const wanted = params.get("preset") || localStorage.getItem("corral.lastPreset") || "";
  const presetSelect = h("select", { id: "launch-preset", required: true });
  const cwdInput = h("input", { type: "text", id: "launch-cwd", value: cwd, list: "launch-folders", placeholder: "/path/to/project", onchange: () => loadPresets() });
  const task = h("textarea", { id: "launch-task", placeholder: "What should the agent do? It sees only this text. (Ctrl+Enter launches)" });
  task.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      form.requestSubmit();
    }
  });
  const model = h("input", { type: "text", id: "launch-model", placeholder: "default: the preset's model" });
  const budget = h("input", { type: "text", id: "launch-budget", placeholder: "default: the preset's or config.toml's — e.g. 2 ($2), 500k (tokens), usd=2,tokens=1M" });
  const worktree = h("input", { type: "checkbox", id: "launch-worktree" });
  let presets = [];
  const presetWorktree = () => {
    const chosen = presets.find((p) => p.name === presetSelect.value);
    worktree.checked = Boolean(chosen && chosen.worktree);
  };
  presetSelect.addEventListener("change", presetWorktree);
  const submit = h("button", { class: "primary", id: "launch-submit", type: "submit" }, "Launch");
  const pick = h("button", { type: "button", id: "launch-pick", onclick: async () => {
    const folder = await call("pick_folder");
    if (folder) { cwdInput.value = folder; await loadPresets(); }
  } }, "Choose…");

  async function loadPresets() {
    let set;
    try {
      set = await call("list_presets", { cwd: cwdInput.value || null, host: hostSelect.value || null });
    } catch (err) {
      say(String(err), true);
      set = { presets: [] };
    }
    const keep = presetSelect.value || wanted;
    presets = set.presets;
    // A preset whose agent is not installed is shown, with why, and cannot be picked.
    // Never an unavailable one picked for the user: the one kept if it
    // can start, else the first that can.
    const startable = set.presets.filter((p) => !p.unavailable).map((p) => p.name);
    const chosen = startable.includes(keep) ? keep : startable[0];
    presetSelect.replaceChildren(...set.presets.map((p) =>
      h("option", { value: p.name, selected: p.name === chosen, disabled: Boolean(p.unavailable), title: p.unavailable ?? "" },
        p.unavailable ? `${p.name} (${p.agent}) — cannot start: ${p.unavailable}` : `${p.name} (${p.agent}) — ${p.description}`)));
    presetWorktree();
  }

  const form = h("form", { class: "form", id: "launch-form", onsubmit: async (e) => {
    e.preventDefault();
    submit.disabled = true;
    try {
      const run = await call("launch_run", { preset: presetSelect.value, task: task.value, cwd: cwdInput.value, model: model.value || null, worktree: worktree.checked, host: hostSelect.value || null, budget: budget.value || null });
      localStorage.setItem("corral.lastPreset", presetSelect.value);
      say(`launched ${run.id}`);
      location.hash = `#/run/${run.id}`;
    } catch (err) {
      say(String(err), true);
    } finally {
      submit.disabled = false;
    }
  } },
    ...(hosts.length ? [h("label", { for: "launch-host" }, "Machine"), hostSelect] : []),
    h("label", { for: "launch-preset" }, "Preset"), presetSelect,
    h("label", { for: "launch-task" }, "Task"), task,
    h("label", { for: "launch-cwd" }, "Folder"), h("div", { class: "row" }, cwdInput, pick),
    h("label", { for: "launch-model" }, "Model"), model,
    h("label", { for: "launch-budget" }, "Budget"), budget,
    h("label", { for: "launch-worktree" }, "Worktree"),
    h("label", { class: "check" }, worktree,
      " its own git worktree and branch — uncommitted work in your tree is not copied"),
    h("span"), h("div", {}, submit),
  );
  view.append(h("h1", {}, "Launch"), form, h("datalist", { id: "launch-folders" }, folders.map((f) => h("option", { value: f }))));
  if (hostSelect.value) hostSelect.dispatchEvent(new Event("change"));
  else await loadPresets();
  task.focus();
}

export function leave() {
  root = null;
}
