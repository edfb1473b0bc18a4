#!/usr/bin/env bash
# vLLM's own pre-commit checks (build/vllm/.pre-commit-config.yaml) on the
# tree after EACH patch of the series, for the Python files the series has
# touched so far, with the config files of that tree (pyproject.toml,
# .yapfignore). The tools come from build/lint-tools (scripts/setup-lint.sh);
# the pre-commit hook repos live on GitHub, so the tools run directly.
#
#   scripts/lint-series.sh          every prefix of patches/series
#   scripts/lint-series.sh --base   the untouched release, on the files that
#                                   the series touches (no false positives)
#
# Hooks run (check mode; pre-commit's --fix/--in-place/--write-changes off):
#   yapf, ruff (check), ruff-format (only its files), typos, isort,
#   mypy-3.9..3.12 (the CI hooks, in parallel; LINT_MYPY="3.9" for fewer),
#   and the local hooks check-spdx-header, check-root-lazy-imports,
#   check-filenames, update-dockerfile-graph, check-pickle-imports,
#   validate-config, enforce-import-regex-instead-of-re and
#   forbid-direct-triton-import.
# The two hooks that read the staged diff (regex, triton) see the series so
# far staged on top of base, as when committing it in one go (so in --base
# mode they have nothing to check).
# Works in a throwaway worktree (build/lint), so build/vllm is not touched.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/series-env.sh
bin=$PWD/build/lint-tools/bin
wt=build/lint
out=$PWD/build/lint.out
mypy_versions=${LINT_MYPY:-3.9 3.10 3.11 3.12}
export PATH="$bin:$PATH" MYPY_CACHE_DIR=$PWD/build/lint-cache/mypy \
  RUFF_CACHE_DIR=$PWD/build/lint-cache/ruff
[ -x "$bin/yapf" ] || { echo "lint: run scripts/setup-lint.sh first" >&2; exit 1; }

git -C "$tree" worktree remove --force "$PWD/$wt" 2>/dev/null || rm -rf "$wt"
git -C "$tree" worktree prune
git -C "$tree" worktree add --quiet --detach "$PWD/$wt" base
cleanup() {
  git -C "$tree" worktree remove --force "$PWD/$wt" 2>/dev/null || rm -rf "$wt"
  git -C "$tree" worktree prune
  rm -f "$out"
}
trap cleanup EXIT

label=""      # "[n/N] patches/....patch", for messages
failed=()     # hooks that failed on the current tree
status=0

# hook FILE-OR-'' NAME CMD...: run CMD in the worktree; on failure, say
# which patch, file and hook, with the tool's output.
hook() {
  local file=$1 name=$2
  shift 2
  (cd "$wt" && "$@") >"$out" 2>&1 || report "$file" "$name" "$out"
}

# report FILE-OR-'' NAME OUTPUT-FILE: a hook failed.
report() {
  local file=$1
  if [ -z "$file" ]; then  # a whole-tree hook: name the files it reports
    file=$(grep -oF -f <(printf '%s\n' "${files[@]}") "$3" | sort -u |
      paste -sd' ' || true)
  fi
  echo "lint: $label: ${file:-(tree)}: $2 failed:" >&2
  sed 's/^/    /' "$3" >&2
  failed+=("$2${file:+ ($file)}")
  status=1
}

# mypy as vLLM's CI hooks run it (tools/pre_commit/mypy.py 1 VERSION
# FILES), one process per Python version, in parallel.
mypy_hooks() {
  local v pids=() i=0
  for v in $mypy_versions; do
    (cd "$wt" && python tools/pre_commit/mypy.py 1 "$v" "${files[@]}") \
      >"$out.mypy-$v" 2>&1 &
    pids+=($!)
  done
  for v in $mypy_versions; do
    wait "${pids[$i]}" || report "" "mypy-$v" "$out.mypy-$v"
    rm -f "$out.mypy-$v"
    i=$((i + 1))
  done
}

# yapf looks for its style from the file's folder up to /, past the tree:
# where the tree has none (vLLM 0.11.0 has none), say pep8, yapf's default,
# so that a style file above build/ cannot leak in.
yapf_style() {
  local d
  d=$(dirname "$1")
  while :; do
    if [ -f "$wt/$d/.style.yapf" ] ||
        grep -qs '^\[yapf\]' "$wt/$d/setup.cfg" ||
        grep -qs '^\[tool\.yapf\]' "$wt/$d/pyproject.toml"; then
      return 0
    fi
    [ "$d" != . ] || break
    d=$(dirname "$d")
  done
  echo "--style=pep8"
}

# Every hook that pre-commit would run on a commit of these Python files.
lint_tree() {
  local f all style yapf_files=()
  failed=()
  mapfile -t all < <(git -C "$wt" diff --name-only --diff-filter=d base HEAD)
  mapfile -t files < <(printf '%s\n' "${lint_files[@]}" |
    grep -Ev 'vllm/third_party/.*' || true)  # pre-commit's global exclude
  [ ${#files[@]} -gt 0 ] || return 0
  for f in "${files[@]}"; do
    hook "$f" check-pickle-imports \
      python tools/pre_commit/check_pickle_imports.py "$f"
    hook "$f" validate-config python tools/validate_config.py "$f"
    hook "$f" ruff ruff check --force-exclude --no-fix --output-format full "$f"
    hook "$f" isort isort --check-only --diff --filter-files "$f"
    hook "$f" typos typos --force-exclude "$f"
    if [[ $f =~ ^(.buildkite|benchmarks|examples)/.* ]]; then
      hook "$f" ruff-format ruff format --force-exclude --check --diff "$f"
    fi
    if ! [[ $f =~ (.buildkite|benchmarks|build|examples)/.* ]]; then
      yapf_files+=("$f")
    fi
  done
  for f in "${yapf_files[@]}"; do
    mapfile -t style < <(yapf_style "$f")
    hook "$f" yapf yapf --diff "${style[@]}" "$f"
  done
  for f in "${files[@]}"; do
    hook "$f" check-spdx-header python tools/check_spdx_header.py "$f"
  done
  # check_spdx_header.py adds the header it finds missing: undo that.
  git -C "$wt" reset --quiet --hard HEAD
  mypy_hooks
  hook "" check-root-lazy-imports python tools/check_init_lazy_imports.py
  hook "" check-filenames bash -c \
    'git ls-files | grep " " && echo "Filenames should not contain spaces!" && exit 1 || exit 0'
  hook "" update-dockerfile-graph tools/update-dockerfile-graph.sh "${all[@]}"
  # These two read `git diff --cached`: stage the series so far on base.
  local head
  head=$(git -C "$wt" rev-parse HEAD)
  git -C "$wt" reset --quiet --soft base
  hook "" enforce-import-regex-instead-of-re python tools/enforce_regex_import.py
  hook "" forbid-direct-triton-import python tools/check_triton_import.py
  git -C "$wt" reset --quiet --soft "$head"
}

summary() {  # N-FILES
  if [ ${#failed[@]} -eq 0 ]; then
    echo "lint: $label: $1 .py files pass yapf, ruff, isort, typos," \
      "mypy ${mypy_versions// /,}, spdx and the other local hooks" \
      "($((SECONDS - started)) s)"
  else
    echo "lint: $label: FAILED ($((SECONDS - started)) s): ${failed[*]}" >&2
  fi
}

mapfile -t patches < <(series_patches)
apply_patch() {  # N PATCH
  if ! git -C "$wt" am --quiet --keep-cr --keep-non-patch "$PWD/$2" \
      >/dev/null 2>"$out"; then
    echo "lint: [$1/${#patches[@]}] $2 does not apply:" >&2
    sed 's/^/  /' "$out" >&2
    exit 1
  fi
}

if [ "${1:-}" = --base ]; then
  # The files the whole series touches, as they are in the release.
  n=0
  for p in "${patches[@]}"; do n=$((n + 1)); apply_patch "$n" "$p"; done
  mapfile -t lint_files < <(git -C "$wt" diff --name-only --diff-filter=M \
    base HEAD -- '*.py')
  git -C "$wt" checkout --quiet --detach base
  label="base (untouched)"
  started=$SECONDS
  lint_tree
  summary "${#files[@]}"
  exit $status
fi

n=0
for p in "${patches[@]}"; do
  n=$((n + 1))
  label="[$n/${#patches[@]}] $p"
  started=$SECONDS
  apply_patch "$n" "$p"
  mapfile -t lint_files < <(git -C "$wt" diff --name-only --diff-filter=d \
    base HEAD -- '*.py')
  lint_tree
  summary "${#files[@]}"
done
[ $status -eq 0 ] || echo "lint: FAILED (see above); the tree after each patch must pass" >&2
exit $status
