#!/usr/bin/env bash
# Build neardup's sdist and wheel (python3 -m build), check that the wheel holds every file of
# the package, install that wheel alone (with the `service` extra, from PyPI or pip's cache) into
# a fresh virtual environment, and there run the README's main job (the first `neardup dedup`
# line of its "Run" section, on a copy of examples/) and `neardup serve` (started on a free port
# of 127.0.0.1, asked /healthz and one /v1/check with urllib, stopped by its PID).
#
#   bash scripts/check-wheel.sh [SOURCE_DIR]     # default: this repository
#
# Needs python3 with `build` (the dev extra) and network access or a warm pip cache. Prints one
# line per step and the seconds taken; exit status 1 on the first failure. .ci/run calls it.
set -euo pipefail

root="$(cd "${1:-$(dirname "$0")/..}" && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/neardup-wheel.XXXXXX")"
server_pid=""
cleanup() {
    if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
started=$SECONDS
step() { echo "check-wheel: $* ($((SECONDS - started)) s)"; }

# 1. Build: the sdist, then the wheel from the sdist (build's default), in isolated environments.
python3 -m build --outdir "$work/dist" "$root" >"$work/build.log" 2>&1 || {
    cat "$work/build.log"
    exit 1
}
wheel="$(ls "$work"/dist/neardup-*.whl)"
sdist="$(ls "$work"/dist/neardup-*.tar.gz)"
step "built $(basename "$wheel") and $(basename "$sdist")"

# 2. The wheel and the sdist hold every file of the package: what git tracks under src/neardup
#    (every file there, caches left out, where SOURCE_DIR is not a git checkout).
python3 - "$root" "$wheel" "$sdist" <<'EOF'
import subprocess, sys, tarfile, zipfile
from pathlib import Path

root, wheel, sdist = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
listed = subprocess.run(["git", "-C", str(root), "ls-files", "src/neardup"], capture_output=True, text=True)
if listed.returncode == 0 and listed.stdout.strip():
    files = listed.stdout.split()
else:
    files = [
        str(path.relative_to(root)) for path in (root / "src" / "neardup").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    ]
in_wheel = set(zipfile.ZipFile(wheel).namelist())
with tarfile.open(sdist) as archive:
    in_sdist = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
missing = [f"wheel: {name}" for name in files if name.removeprefix("src/") not in in_wheel]
missing += [f"sdist: {name}" for name in files if name not in in_sdist]
if missing:
    sys.exit("check-wheel: package files missing from the build:\n  " + "\n  ".join(missing))
data = [name for name in files if not name.endswith(".py")]
print(f"check-wheel: the wheel and the sdist hold all {len(files)} files of src/neardup ({', '.join(data)})")
EOF

# 3. A fresh virtual environment with only the wheel (and its dependencies) installed.
python3 -m venv "$work/venv"
venv_python="$work/venv/bin/python"
"$venv_python" -m pip install --quiet --disable-pip-version-check "${wheel}[service]" >"$work/pip.log" 2>&1 || {
    cat "$work/pip.log"
    exit 1
}
mkdir "$work/run"
cp -r "$root/examples" "$work/run/examples"
cd "$work/run"
installed="$("$venv_python" -c 'import neardup; print(neardup.__file__)')"
case "$installed" in
"$work"/venv/*) ;;
*)
    echo "check-wheel: neardup imported from $installed, not from the virtual environment" >&2
    exit 1
    ;;
esac
step "installed the wheel into a fresh virtual environment ($installed)"

# 4. The README's main job, as written, with the wheel's `neardup` command.
job="$(awk '/^## Run$/ {run = 1; next} /^## / {run = 0} run && /^neardup dedup / {print; exit}' "$root/README.md")"
if [[ -z "$job" ]]; then
    echo "check-wheel: no 'neardup dedup' line in the README's Run section" >&2
    exit 1
fi
read -r -a words <<<"$job"
PATH="$work/venv/bin:$PATH" "${words[@]}" 2>"$work/dedup.err" || {
    cat "$work/dedup.err"
    exit 1
}
"$venv_python" - "$job" <<'EOF'
import json, shlex, sys

arguments = shlex.split(sys.argv[1])
records = sum(1 for line in open(arguments[2], encoding="utf-8") if line.strip())
for flag in ("--pairs", "--clusters"):
    if flag in arguments:
        rows = [json.loads(line) for line in open(arguments[arguments.index(flag) + 1], encoding="utf-8")]
        assert flag == "--pairs" or len(rows) == records, f"{flag}: {len(rows)} lines for {records} records"
EOF
step "ran: $job"
echo "  $(grep '^neardup: ' "$work/dedup.err" | tail -n 1)"

# 5. neardup serve on a free port: /healthz, one /v1/check, then stop it by its PID.
port="$("$venv_python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$work/venv/bin/neardup" serve "$work/run/served.db" --host 127.0.0.1 --port "$port" >"$work/serve.log" 2>&1 &
server_pid=$!
"$venv_python" - "$port" "$server_pid" <<'EOF' || { cat "$work/serve.log"; exit 1; }
import json, os, sys, time, urllib.request

port, pid = int(sys.argv[1]), int(sys.argv[2])
base = f"http://127.0.0.1:{port}"
deadline = time.monotonic() + 60
while True:
    try:
        with urllib.request.urlopen(f"{base}/healthz", timeout=5) as answer:
            health = json.load(answer)
        break
    except OSError:
        os.kill(pid, 0)  # the server is still running
        if time.monotonic() > deadline:
            sys.exit("check-wheel: neardup serve did not answer /healthz within 60 s")
        time.sleep(0.2)
request = urllib.request.Request(
    f"{base}/v1/check",
    data=json.dumps({"id": "n1", "text": "Near-duplicate detection, installed from a wheel."}).encode(),
    headers={"Content-Type": "application/json"},
)
with urllib.request.urlopen(request, timeout=30) as answer:
    checked = json.load(answer)
assert checked["id"] == "n1" and checked["added"] is True, checked
print(f"check-wheel: neardup serve answered /healthz {json.dumps(health)} and /v1/check {json.dumps(checked)}")
EOF
kill "$server_pid"
wait "$server_pid" 2>/dev/null || true
server_pid=""
step "stopped neardup serve (port $port)"
step "the wheel works"
