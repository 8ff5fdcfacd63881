#!/usr/bin/env bash
# Refreshes data/prices.json, the price table Corral estimates costs with
# when an agent reports tokens but no cost (Codex, Gemini CLI, Claude with
# some providers). The source is LiteLLM's model price list, as shipped in
# the `litellm` package on PyPI (a well-kept, MIT-licensed list of every
# provider's prices); only the providers of the agents Corral runs are kept.
#   ./scripts/refresh-prices.sh            # the newest litellm
#   ./scripts/refresh-prices.sh 1.109.1    # a given version
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m pip download --no-deps --quiet -d "$work" "litellm${version:+==$version}"
wheel=$(ls "$work"/litellm-*.whl)
python3 - "$wheel" data/prices.json <<'PY'
import json, re, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
version = re.search(r"litellm-([^-]+)-", wheel).group(1)
with zipfile.ZipFile(wheel) as z:
    table = json.loads(z.read("litellm/model_prices_and_context_window_backup.json"))
keep = {"anthropic": "", "openai": "", "gemini": "gemini/"}
models = {}
for name, entry in table.items():
    if not isinstance(entry, dict) or entry.get("mode") not in (None, "chat", "responses"):
        continue
    prefix = keep.get(entry.get("litellm_provider"))
    if prefix is None or entry.get("input_cost_per_token") is None:
        continue
    per_million = lambda key: round((entry.get(key) or 0) * 1e6, 6)
    models[name.removeprefix(prefix)] = [per_million("input_cost_per_token"), per_million("output_cost_per_token"),
                                         per_million("cache_read_input_token_cost"),
                                         per_million("cache_creation_input_token_cost")]
doc = {"source": f"litellm {version}: litellm/model_prices_and_context_window_backup.json (PyPI)",
       "unit": "USD per million tokens: input, output, cache read, cache write",
       "models": dict(sorted(models.items()))}
with open(out, "w") as f:
    # One model a line: a refresh reads as a diff of prices.
    f.write("{\n" + f'"source": {json.dumps(doc["source"])},\n"unit": {json.dumps(doc["unit"])},\n"models": {{\n')
    f.write(",\n".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in doc["models"].items()))
    f.write("\n}}\n")
print(f"{out}: {len(models)} models from litellm {version}")
PY
