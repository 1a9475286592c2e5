#!/usr/bin/env bash
# A real Garage cluster on this machine's loopback, for the tests and benchmarks of a library on
# S3-compatible storage (issue 60). Garage (crates.io `garage`, AGPL-3.0) is built once into
# ~/.cache/quire/tools (its own target folder, never the workspace's).
#
#   tools/garage.sh install        build Garage 2.5.0 once (about 25 minutes on 2 cores)
#   tools/garage.sh start [DIR] [N] N nodes (default 3, replication N) under DIR (default
#                                  /tmp/quire-garage), each in its own zone; a bucket `quire` and
#                                  a key with read and write on it; prints the S3 settings and
#                                  writes them to DIR/env (source it)
#   tools/garage.sh stop [DIR]     stops every node
#   tools/garage.sh kill NODE [DIR]   kill -9 one node (1..N), for the fault tests
#   tools/garage.sh revive NODE [DIR] starts that node again on its data
#
# Ports: node i listens for S3 on 39i0, RPC on 39i1, admin on 39i3 (127.0.0.1 only).
set -euo pipefail
GARAGE_VERSION=2.5.0
TOOLS="$HOME/.cache/quire/tools"
GARAGE="$TOOLS/bin/garage"
command=${1:-}
shift || true

install() {
    if [[ -x "$GARAGE" ]] && "$GARAGE" --version 2>/dev/null | grep -q "$GARAGE_VERSION"; then
        return
    fi
    cargo install garage --version "=$GARAGE_VERSION" --locked --root "$TOOLS" \
        --target-dir "$HOME/.cache/quire/tools-target"
}

node_dir() { echo "$1/node$2"; }

write_config() { # DIR NODE N SECRET
    local dir node n secret
    dir=$(node_dir "$1" "$2"); node=$2; n=$3; secret=$4
    mkdir -p "$dir/meta" "$dir/data"
    cat > "$dir/garage.toml" <<EOF
metadata_dir = "$dir/meta"
data_dir = "$dir/data"
db_engine = "sqlite"
replication_factor = $n
rpc_bind_addr = "127.0.0.1:39${node}1"
rpc_public_addr = "127.0.0.1:39${node}1"
rpc_secret = "$secret"

[s3_api]
s3_region = "garage"
api_bind_addr = "127.0.0.1:39${node}0"
root_domain = ".s3.garage.localhost"

[admin]
api_bind_addr = "127.0.0.1:39${node}3"
admin_token = "$secret"
EOF
}

run_node() { # DIR NODE
    local dir
    dir=$(node_dir "$1" "$2")
    nohup "$GARAGE" -c "$dir/garage.toml" server > "$dir/server.log" 2>&1 &
    echo $! > "$dir/pid"
}

garage_at() { # DIR NODE ARGS...
    local dir=$1 node=$2
    shift 2
    "$GARAGE" -c "$(node_dir "$dir" "$node")/garage.toml" "$@"
}

start() {
    local dir=${1:-/tmp/quire-garage} n=${2:-3}
    install
    if [[ -f "$dir/env" ]]; then stop "$dir"; fi
    rm -rf "$dir"
    mkdir -p "$dir"
    local secret
    secret=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
    for i in $(seq 1 "$n"); do
        write_config "$dir" "$i" "$n" "$secret"
        run_node "$dir" "$i"
    done
    for i in $(seq 1 "$n"); do
        for _ in $(seq 1 60); do
            garage_at "$dir" "$i" status > /dev/null 2>&1 && break
            sleep 1
        done
    done
    local first
    first=$(garage_at "$dir" 1 node id -q)
    for i in $(seq 2 "$n"); do
        garage_at "$dir" "$i" node connect "$first" > /dev/null
    done
    for i in $(seq 1 "$n"); do
        local id
        id=$(garage_at "$dir" "$i" node id -q)
        garage_at "$dir" 1 layout assign "${id%%@*}" -z "zone$i" -c 1G > /dev/null
    done
    garage_at "$dir" 1 layout apply --version 1 > /dev/null
    # The layout reaches every node in a moment; until then a write cannot find its quorum.
    for _ in $(seq 1 60); do
        garage_at "$dir" 1 bucket create quire > /dev/null 2>&1 && break
        sleep 1
    done
    garage_at "$dir" 1 bucket info quire > /dev/null
    local key
    key=$(garage_at "$dir" 1 json-api CreateKey '{"name":"quire"}')
    local id secret_key
    id=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["accessKeyId"])' <<< "$key")
    secret_key=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["secretAccessKey"])' <<< "$key")
    garage_at "$dir" 1 bucket allow --read --write --owner --key quire quire > /dev/null
    cat > "$dir/env" <<EOF
export QUIRE_TEST_S3_ENDPOINT=http://127.0.0.1:3910
export QUIRE_TEST_S3_REGION=garage
export QUIRE_TEST_S3_BUCKET=quire
export QUIRE_TEST_S3_KEY_ID=$id
export QUIRE_TEST_S3_SECRET=$secret_key
export QUIRE_TEST_GARAGE_NODES=$n
export QUIRE_TEST_GARAGE_DIR=$dir
EOF
    chmod 600 "$dir/env"
    echo "Garage: $n nodes under $dir, bucket quire, S3 at http://127.0.0.1:3910 (each node i at 39i0); settings in $dir/env"
}

stop() {
    local dir=${1:-/tmp/quire-garage}
    for pid in "$dir"/node*/pid; do
        [[ -f "$pid" ]] || continue
        kill "$(cat "$pid")" 2> /dev/null || true
        rm -f "$pid"
    done
}

case "$command" in
    install) install ;;
    start) start "$@" ;;
    stop) stop "$@" ;;
    kill) kill -9 "$(cat "$(node_dir "${2:-/tmp/quire-garage}" "$1")/pid")" ;;
    revive) run_node "${2:-/tmp/quire-garage}" "$1" ;;
    *) sed -n '2,15p' "$0" >&2; exit 2 ;;
esac
