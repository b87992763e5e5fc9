# Sourced, not run: builds a Go program from the Go module proxy through a wrapper module of
# tools/ (go.mod and go.sum only), once per machine, and checks what it built. The scripts that
# print a tool's path (kbagent.sh, kubeblocks.sh, versitygw.sh, coredns.sh) call these.
#   go_tool_version WRAPPER MODULE        the version WRAPPER/go.mod requires of MODULE, without its v
#   go_tool_build NAME WRAPPER MODULE PACKAGE DIR [LDFLAGS]
#                                         makes DIR/NAME the build of PACKAGE from MODULE at the
#                                         wrapper's version, unless it already is; prints its path
# A build goes into a temporary folder beside DIR and is moved into place only once checked, so a
# killed build leaves nothing that looks built; one build at a time per cache (flock), and a second
# caller waits, then finds it built. The check reads the binary's own build record (`go version -m`:
# its main package and MODULE's version); a script may define `go_tool_extra_check BIN` to check
# more. Build output goes to stderr, so `bin="$(bash scripts/<tool>.sh)"` reads only the path.

go_tool_version() {
  local wrapper="$1" module="$2" pattern version
  pattern="${module//./\\.}"
  pattern="${pattern//\//\\/}"
  version="$(sed -n -E "s/^[[:space:]]*(require )?${pattern} v([0-9][0-9A-Za-z.+-]*)( .*)?\$/\\2/p" "$wrapper/go.mod" | sed -n 1p)"
  [ -n "$version" ] || {
    echo "$wrapper/go.mod requires no $module version" >&2
    return 1
  }
  echo "$version"
}

# go_tool_check NAME BIN PACKAGE MODULE VERSION: BIN is PACKAGE built from MODULE at VERSION.
go_tool_check() {
  local name="$1" bin="$2" package="$3" module="$4" version="$5" info path mod
  if [ ! -x "$bin" ]; then
    echo "$name: $bin is missing" >&2
    return 1
  fi
  info="$(GOTOOLCHAIN=local go version -m "$bin" 2>&1)" || {
    echo "$name: go version -m $bin failed: $info" >&2
    return 1
  }
  # Here-strings, not `printf | awk '{ …; exit }'`: awk leaving before printf has written a long
  # module list kills printf with SIGPIPE, and pipefail makes that the script's exit status.
  path="$(awk '$1 == "path" { print $2; exit }' <<<"$info")"
  mod="$(awk -v m="$module" '$1 == "mod" && $2 == m { print $3; exit }' <<<"$info")"
  if [ "$path" != "$package" ] || [ "$mod" != "v$version" ]; then
    echo "$name: $bin is '${path:-?}' of $module '${mod:-?}', expected $package of v$version" >&2
    return 1
  fi
  if declare -F go_tool_extra_check >/dev/null; then go_tool_extra_check "$bin"; fi
}

go_tool_build() {
  local name="$1" wrapper="$2" module="$3" package="$4" dir="$5" ldflags="${6:-}" version cache bin tmp started
  command -v go >/dev/null 2>&1 || {
    echo "$name: $package is built (and its version checked) with Go, and there is no go on PATH" >&2
    return 1
  }
  version="$(go_tool_version "$wrapper" "$module")" || return 1
  bin="$dir/$name"
  if ! go_tool_check "$name" "$bin" "$package" "$module" "$version" 2>/dev/null; then
    cache="$(dirname "$dir")"
    mkdir -p "$cache"
    exec 9>"$cache/.$name.lock"
    flock 9
    if ! go_tool_check "$name" "$bin" "$package" "$module" "$version" 2>/dev/null; then
      echo "$name: building $package v$version from $wrapper (a first build takes minutes)" >&2
      started=$SECONDS
      tmp="$(mktemp -d "$cache/.build-$name-$version.XXXXXX")"
      # GOTOOLCHAIN=local: build with this machine's Go, never download another one silently.
      if ! (
        cd "$wrapper"
        export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=readonly
        go build -trimpath ${ldflags:+-ldflags "$ldflags"} -o "$tmp/$name" "$package"
      ) >&2 || ! go_tool_check "$name" "$tmp/$name" "$package" "$module" "$version"; then
        rm -rf "$tmp"
        return 1
      fi
      rm -rf "${dir:?}"
      mv "$tmp" "$dir"
      echo "$name: built $package v$version in $((SECONDS - started)) s" >&2
    fi
    exec 9>&-
  fi
  go_tool_check "$name" "$bin" "$package" "$module" "$version" || return 1
  echo "$bin"
}
