#!/usr/bin/env bash
# Install the database servers that the storage tests and benchmarks start on 127.0.0.1
# (scripts/servers.py): Debian's redis-server, postgresql and mariadb-server (plus chromium, the
# headless browser that tests the HTML report), and the npm package
# @jongodb/memory-server-bin-linux-x64-gnu (a MongoDB-wire-protocol test server; no real MongoDB
# can be installed here). Idempotent: installs only what is missing, runs `apt-get update` at
# most once, and leaves no system service running (tests start their own servers as needed).
# Override the npm cache folder with NEARDUP_CACHE (default ~/.cache/neardup).
set -euo pipefail

packages=(redis-server postgresql mariadb-server chromium)
services=(redis-server postgresql mariadb)
cache="${NEARDUP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/neardup}"
jongodb_dir="$cache/jongodb"
jongodb_package="@jongodb/memory-server-bin-linux-x64-gnu"

say() { printf 'install-servers: %s\n' "$*"; }

installed() {
    [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" == "install ok installed" ]]
}

missing=()
for package in "${packages[@]}"; do
    if installed "$package"; then
        say "$package: already installed"
    else
        missing+=("$package")
    fi
done

if ((${#missing[@]})); then
    sudo=()
    if [[ $(id -u) -ne 0 ]]; then
        sudo=(sudo)
    fi
    # Forbid service starts during the install (Debian's invoke-rc.d honours policy-rc.d exit 101),
    # restoring any policy-rc.d the machine already had.
    policy=/usr/sbin/policy-rc.d
    backup=""
    if [[ -e $policy ]]; then
        backup="$(mktemp)"
        "${sudo[@]}" cp -p "$policy" "$backup"
    fi
    restore_policy() {
        if [[ -n $backup ]]; then
            "${sudo[@]}" cp -p "$backup" "$policy"
            rm -f "$backup"
        else
            "${sudo[@]}" rm -f "$policy"
        fi
    }
    trap restore_policy EXIT
    printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
    "${sudo[@]}" chmod 755 "$policy"

    say "installing ${missing[*]} (apt-get update, then apt-get install)"
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "${missing[@]}" >/dev/null
    restore_policy
    trap - EXIT
    say "installed ${missing[*]}"

    # Belt and braces: stop any system instance that started anyway (e.g. under systemd).
    for service in "${services[@]}"; do
        if command -v service >/dev/null && "${sudo[@]}" service "$service" status >/dev/null 2>&1; then
            "${sudo[@]}" service "$service" stop >/dev/null 2>&1 || true
            say "stopped the system $service service that the install started"
        fi
    done
fi

if [[ -x "$jongodb_dir/package/bin/jongodb" ]]; then
    say "jongodb: already unpacked in $jongodb_dir"
else
    command -v npm >/dev/null || { say "npm is needed to fetch $jongodb_package" >&2; exit 1; }
    say "fetching $jongodb_package into $jongodb_dir"
    mkdir -p "$jongodb_dir"
    work="$(mktemp -d)"
    (cd "$work" && npm pack --loglevel=error "$jongodb_package" >/dev/null)
    rm -rf "$jongodb_dir/package"
    tar -xzf "$work"/*.tgz -C "$jongodb_dir"
    cp "$work"/*.tgz "$jongodb_dir/"
    rm -rf "$work"
    chmod +x "$jongodb_dir/package/bin/jongodb"
    say "jongodb: unpacked $(basename "$jongodb_dir"/*.tgz) to $jongodb_dir/package"
fi

postgres_binaries=(/usr/lib/postgresql/*/bin/postgres)
say "ready: $(command -v redis-server) ${postgres_binaries[*]} $(command -v mariadbd || echo /usr/sbin/mariadbd)\
 $jongodb_dir/package/bin/jongodb"
