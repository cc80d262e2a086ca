#!/usr/bin/env bash
# Derives the retrieval sets of the discovery bench (docs/src/discovery.md,
# "Retrieval quality") from the Berkeley Function Calling Leaderboard's data,
# which PyPI's `bfcl-eval` (Apache-2.0) ships in its wheel:
#   target/bench-data/bfcl-simple-python.json  BFCL_v4_simple_python (one function per question)
#   target/bench-data/bfcl-multiple.json       BFCL_v4_multiple (the called function of 2-4 offered)
#   target/bench-data/bfcl-live-simple.json    BFCL_v4_live_simple (user-contributed functions)
# Each set: the distinct functions (name, description, parameters) of every
# item pooled into one catalogue, and each question with the function its
# ground truth calls. Idempotent; only `pip download` reaches a registry.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pin="2026.3.23"
out="$root/target/bench-data"
mkdir -p "$out"
if [ -f "$out/bfcl-simple-python.json" ] && [ -f "$out/bfcl-multiple.json" ] && [ -f "$out/bfcl-live-simple.json" ]; then
  exit 0
fi
wheel="$(ls "$out"/bfcl_eval-"$pin"-*.whl 2>/dev/null | head -n1 || true)"
if [ -z "$wheel" ]; then
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    -d "$out" "bfcl-eval==$pin"
  wheel="$(ls "$out"/bfcl_eval-"$pin"-*.whl | head -n1)"
fi
python3 - "$wheel" "$out" "$pin" <<'PY'
import json, sys, zipfile
wheel, out, pin = sys.argv[1], sys.argv[2], sys.argv[3]
w = zipfile.ZipFile(wheel)

def lines(path):
    return [json.loads(l) for l in w.read(path).decode().splitlines() if l.strip()]

def params_of(fn):
    props = (fn.get("parameters") or {}).get("properties") or {}
    return {k: (v.get("description") or "") for k, v in props.items() if isinstance(v, dict)}

def question_of(item):
    turns = item["question"][0] if item["question"] and isinstance(item["question"][0], list) else item["question"]
    users = [m["content"] for m in turns if m.get("role") == "user"]
    return users[-1] if users else None

def derive(category, out_name):
    items = lines(f"bfcl_eval/data/BFCL_v4_{category}.json")
    answers = {}
    try:
        for a in lines(f"bfcl_eval/data/possible_answer/BFCL_v4_{category}.json"):
            answers[a["id"]] = a["ground_truth"]
    except KeyError:
        pass
    tools, seen, queries = [], set(), []
    for item in items:
        for fn in item["function"]:
            if fn["name"] not in seen:
                seen.add(fn["name"])
                tools.append({"name": fn["name"], "description": fn.get("description", ""), "params": params_of(fn)})
        truth = answers.get(item["id"])
        if truth and len(truth) == 1:
            target = next(iter(truth[0]))
        elif len(item["function"]) == 1:
            target = item["function"][0]["name"]
        else:
            continue
        q = question_of(item)
        if q:
            queries.append({"query": q, "tool": target})
    doc = {
        "name": f"BFCL {category}",
        "provenance": f"PyPI bfcl-eval=={pin} (Apache-2.0), bfcl_eval/data/BFCL_v4_{category}.json and possible_answer/; functions pooled, deduplicated by name",
        "tools": tools,
        "queries": queries,
    }
    with open(f"{out}/{out_name}", "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
    print(f"retrieval-sets: {out_name}: {len(tools)} tools, {len(queries)} queries", file=sys.stderr)

derive("simple_python", "bfcl-simple-python.json")
derive("multiple", "bfcl-multiple.json")
derive("live_simple", "bfcl-live-simple.json")
PY
