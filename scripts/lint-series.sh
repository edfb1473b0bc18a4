#!/usr/bin/env bash
# vLLM's own pre-commit checks (build/vllm/.pre-commit-config.yaml of 0.34.0)
# on the tree after EACH patch of the series, for the Python files the series
# has touched so far, with the config files of that tree (pyproject.toml's
# [tool.ruff], [tool.typos], [tool.mypy]). The tools come from
# build/lint-tools (scripts/setup-lint.sh); the pre-commit hook repos live on
# GitHub, so the tools run directly.
#
#   scripts/lint-series.sh                every prefix of patches/series
#                                         (make lint: each patch bisectable)
#   scripts/lint-series.sh --final        the tree after the whole series,
#                                         once, on every file it touches
#                                         (make test: the per-patch run
#                                         lints the same files 17 times)
#   scripts/lint-series.sh --base         the untouched release, on the files
#                                         that the series touches (no false
#                                         positives)
#   scripts/lint-series.sh --base PATH..  the untouched release, on these
#                                         files (git pathspecs: quote globs)
#
# Hooks run (check mode; pre-commit's --fix/--write-changes off), on the
# Python files minus the config's global `exclude`:
#   ruff-check, ruff-format (--diff), typos (--force-exclude),
#   mypy (tools/pre_commit/mypy.py "3.11", the only mypy hook in 0.34.0),
#   check-spdx-header (it adds the header it finds missing: undone),
#   check-root-lazy-imports, check-filenames, update-dockerfile-graph,
#   check-forbidden-imports (pickle, re, triton, tilelang, huggingface_hub,
#   transformers legacy names: the old regex/triton/pickle hooks, now on the
#   files given, no staged diff), check-torch-cuda-call, validate-config,
#   check-boolean-context-manager, check-trust-remote-code (vllm/ files),
#   check-dockerignore-tracked, check-test-tethering (the tests/*.py and
#   .buildkite pipeline files changed: a new test must be run by a Buildkite
#   job or be in tools/pre_commit/test_tethering_allowlist.txt).
# Skipped, none applies to Python files: clang-format, markdownlint-cli2,
# actionlint, shellcheck, pip-compile*, check-json, check-github-actions-pins,
# format-torch-nightly-test, check-label-rules, check-agent-files,
# check-buildkite-step-keys, png-lint, test-nonroot-entrypoint,
# validate-docker-versions, check-kv-connector-lock, rust-cargo-*; and
# signoff-commit (commit-msg stage: scripts/make-pr.sh signs off) and
# suggestion (only echoes a tip).
# SKIP=hook-id,... leaves those hooks out, as with pre-commit (say why).
# Works in a throwaway worktree (build/lint), so build/vllm is not touched.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/series-env.sh
bin=$PWD/build/lint-tools/bin
wt=build/lint
out=$PWD/build/lint.out
export PATH="$bin:$PATH" MYPY_CACHE_DIR=$PWD/build/lint-cache/mypy \
  RUFF_CACHE_DIR=$PWD/build/lint-cache/ruff
[ -x "$bin/ruff" ] && [ -x "$bin/typos" ] && [ -x "$bin/mypy" ] ||
  { echo "lint: run scripts/setup-lint.sh first" >&2; exit 1; }

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
  [[ ,${SKIP:-}, != *,$name,* ]] || return 0
  (cd "$wt" && "$@") >"$out" 2>&1 || report "$file" "$name" "$out"
}

# report FILE-OR-'' NAME OUTPUT-FILE: a hook failed.
report() {
  local file=$1
  if [ -z "$file" ]; then  # a many-file hook: name the files it reports
    file=$(grep -oF -f <(printf '%s\n' "${files[@]}") "$3" | sort -u |
      paste -sd' ' || true)
  fi
  echo "lint: $label: ${file:-(tree)}: $2 failed:" >&2
  sed 's/^/    /' "$3" >&2
  failed+=("$2${file:+ ($file)}")
  status=1
}

# The files of $1.. that pre-commit's global `exclude` (a Python regex, in
# the tree's .pre-commit-config.yaml) leaves in, as pre-commit applies it.
not_excluded() {
  (cd "$wt" && python - "$@") <<'EOF'
import re, sys, yaml
with open(".pre-commit-config.yaml", encoding="utf-8") as f:
    exclude = re.compile(yaml.safe_load(f).get("exclude", "^$"))
print("\n".join(p for p in sys.argv[1:] if not exclude.search(p)))
EOF
}

# Every hook that pre-commit would run on a commit of these Python files.
lint_tree() {
  local f all tethered
  failed=()
  mapfile -t all < <(git -C "$wt" diff --name-only --diff-filter=d base HEAD)
  [ ${#lint_files[@]} -gt 0 ] || { files=(); return 0; }
  mapfile -t files < <(not_excluded "${lint_files[@]}" | grep . || true)
  [ ${#files[@]} -gt 0 ] || return 0
  for f in "${files[@]}"; do
    hook "$f" ruff-check \
      ruff check --force-exclude --no-fix --output-format full "$f"
    hook "$f" ruff-format ruff format --force-exclude --check --diff "$f"
    hook "$f" typos typos --force-exclude "$f"
    hook "$f" validate-config python tools/pre_commit/validate_config.py "$f"
  done
  # These print "FILE:LINE: ..." per finding: one run for all the files.
  hook "" check-forbidden-imports \
    python tools/pre_commit/check_forbidden_imports.py "${files[@]}"
  hook "" check-torch-cuda-call \
    python tools/pre_commit/check_torch_cuda.py "${files[@]}"
  hook "" check-boolean-context-manager \
    python tools/pre_commit/check_boolean_context_manager.py "${files[@]}"
  mapfile -t vllm_files < <(printf '%s\n' "${files[@]}" | grep '^vllm/' || true)
  if [ ${#vllm_files[@]} -gt 0 ]; then
    hook "" check-trust-remote-code \
      python tools/pre_commit/check_trust_remote_code.py "${vllm_files[@]}"
  fi
  hook "" check-dockerignore-tracked \
    python tools/pre_commit/check_dockerignore_tracked.py
  mapfile -t tethered < <(printf '%s\n' "${files[@]}" "${all[@]}" | sort -u |
    grep -E '^(tests/.*\.py|\.buildkite/(test_areas|hardware_tests|intel_jobs)/.*\.yaml|\.buildkite/(test-amd|ci_config[^/]*)\.yaml|tools/pre_commit/test_tethering_allowlist\.txt)$' ||
    true)
  if [ ${#tethered[@]} -gt 0 ]; then
    hook "" check-test-tethering \
      python tools/pre_commit/check_test_tethering.py "${tethered[@]}"
  fi
  for f in "${files[@]}"; do
    hook "$f" check-spdx-header python tools/pre_commit/check_spdx_header.py "$f"
  done
  # check_spdx_header.py adds the header it finds missing: undo that.
  git -C "$wt" reset --quiet --hard HEAD
  hook "" mypy python tools/pre_commit/mypy.py 3.11 "${files[@]}"
  hook "" check-root-lazy-imports \
    python tools/pre_commit/check_init_lazy_imports.py "${files[@]}"
  hook "" check-filenames bash -c \
    'git ls-files | grep " " && echo "Filenames should not contain spaces!" && exit 1 || exit 0'
  hook "" update-dockerfile-graph \
    tools/pre_commit/update-dockerfile-graph.sh "${all[@]}"
}

summary() {  # N-FILES
  if [ ${#failed[@]} -eq 0 ]; then
    echo "lint: $label: $1 .py files pass ruff-check, ruff-format, typos," \
      "mypy 3.11, spdx and the other local hooks${SKIP:+ (SKIP=$SKIP)}" \
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
  shift
  if [ $# -gt 0 ]; then  # the files named, as they are in the release
    mapfile -t lint_files < <(git -C "$wt" ls-files -- "$@" | grep '\.py$' ||
      true)
    [ ${#lint_files[@]} -gt 0 ] ||
      { echo "lint: no .py file of base matches: $*" >&2; exit 1; }
  else  # the files the whole series touches, as they are in the release
    n=0
    for p in "${patches[@]}"; do n=$((n + 1)); apply_patch "$n" "$p"; done
    mapfile -t lint_files < <(git -C "$wt" diff --name-only --diff-filter=M \
      base HEAD -- '*.py')
    git -C "$wt" checkout --quiet --detach base
  fi
  label="base (untouched)"
  started=$SECONDS
  lint_tree
  summary "${#files[@]}"
  exit $status
fi

if [ "${1:-}" = --final ]; then
  n=0
  for p in "${patches[@]}"; do n=$((n + 1)); apply_patch "$n" "$p"; done
  label="the tree after all ${#patches[@]} patches"
  started=$SECONDS
  mapfile -t lint_files < <(git -C "$wt" diff --name-only --diff-filter=d \
    base HEAD -- '*.py')
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
