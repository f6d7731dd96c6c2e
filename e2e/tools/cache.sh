# Sourced by build.sh and node/build.sh: the cache directory both build into, and the helpers
# they share. A directory counts only if its .complete stamp (written last) matches the pinned
# inputs and every expected file is there; a build happens in a temporary directory renamed
# into place, so an interrupted build never looks complete. One build per key runs at a time:
# a second caller waits for it, then finds the cache hit. FERRO_IPAM_REBUILD=1 forces a rebuild.
#
#   cache_enter KEY STAMP FILE...   sets $dir; on a hit prints it and exits 0; else sets $tmp
#   cache_commit                    moves $tmp into place as $dir
#
# The caller defines log() and die().

# mod_version GO_MOD MODULE: the version MODULE is required at in GO_MOD.
mod_version() {
  awk -v m="$2" '$1 == "require" && $2 == m { print $3; exit } $1 == m && $2 ~ /^v/ { print $2; exit }' "$1"
}

# kube_ldflags VERSION: -s -w (no symbol table or DWARF, as Kubernetes' own release builds) and
# the -X flags that make a component's /version and --version truthful.
kube_ldflags() {
  local minor=${1#v1.} flags="-s -w" pkg
  minor=${minor%%.*}
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$1 -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  echo "$flags"
}

cache_is_complete() {
  [ "${FERRO_IPAM_REBUILD:-0}" != 1 ] || return 1
  [ -f "$dir/.complete" ] && [ "$(cat "$dir/.complete")" = "$cache_stamp" ] || return 1
  local f
  for f in "${cache_files[@]}"; do [ -s "$dir/$f" ] || return 1; done
}

cache_enter() {
  local key=$1
  cache_stamp=$2
  shift 2
  cache_files=("$@")
  local root=${FERRO_IPAM_CACHE:-$HOME/.cache/ferro-ipam}
  dir="$root/$key"
  if cache_is_complete; then
    log "cache hit: $dir"
    echo "$dir"
    exit 0
  fi
  mkdir -p "$root"
  exec 9>"$root/.$key.lock"
  if ! flock -n 9; then
    log "waiting for another build of $key ..."
    flock 9
  fi
  if cache_is_complete; then
    log "cache hit (built by another process): $dir"
    echo "$dir"
    exit 0
  fi
  # Holding the lock, any temporary directory of this key is an interrupted build's.
  rm -rf "$root/.$key.tmp."*
  tmp=$(mktemp -d "$root/.$key.tmp.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

cache_commit() {
  local f
  for f in "${cache_files[@]}"; do [ -s "$tmp/$f" ] || die "missing $f"; done
  printf '%s\n' "$cache_stamp" >"$tmp/.complete"
  chmod 0755 "$tmp"
  # Replace any stale or partial directory with the finished one.
  if [ -e "$dir" ]; then
    mv "$dir" "$tmp.old"
    rm -rf "$tmp.old"
  fi
  mv "$tmp" "$dir"
  trap - EXIT
}
