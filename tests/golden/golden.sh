#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Golden outputs of fsdpsim (tests/golden/manifest.txt says which file holds which command's
# output). The ctest entries golden_* run `check`; scripts/update_golden.sh runs `update`. Both
# produce an output the same way (produce below), so the test and the regeneration cannot differ.
#
#   golden.sh check FSDPSIM FILE OUT_DIR   run FILE's command, write the output to OUT_DIR/FILE and
#                                          compare it byte for byte with tests/golden/FILE
#   golden.sh stray                        fail if a *.json here is not in the manifest
#   golden.sh update FSDPSIM               rewrite every golden file from FSDPSIM's outputs
# exit 0: identical / done; 1: a difference or a failed command; 2: misuse.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
manifest="$here/manifest.txt"
regen_hint() {
  echo "If the change of a simulated result is intended, regenerate the golden files and commit"
  echo "them with the change:  scripts/update_golden.sh BUILD/bin/fsdpsim  (here: $1)"
}

# Prints "FILE<TAB>ARGUMENTS" for each manifest entry (comments and blank lines skipped).
entries() {
  local line file args
  while IFS= read -r line || [[ -n "$line" ]]; do
    [[ "$line" =~ ^[[:space:]]*(#|$) ]] && continue
    if [[ "$line" != *"|"* ]]; then
      echo "golden.sh: $manifest: no '|' in: $line" >&2
      return 2
    fi
    file="${line%%|*}"
    args="${line#*|}"
    file="${file//[[:space:]]/}"
    args="${args#"${args%%[![:space:]]*}"}"
    printf '%s\t%s\n' "$file" "$args"
  done <"$manifest"
}

# produce FSDPSIM ARGUMENTS DEST ERRFILE: runs fsdpsim and leaves the golden candidate at DEST.
produce() {
  local fsdpsim="$1" dest="$3" err="$4" to_file=0 i
  local -a argv
  read -r -a argv <<<"$2"
  for i in "${!argv[@]}"; do
    if [[ "${argv[$i]}" == "@OUT@" ]]; then
      argv[i]="$dest"
      to_file=1
    fi
  done
  rm -f "$dest"
  if ((to_file)); then
    "$fsdpsim" "${argv[@]}" >/dev/null 2>"$err"
  else
    "$fsdpsim" "${argv[@]}" >"$dest" 2>"$err"
  fi
}

# Shows where ACTUAL first differs from GOLDEN: cmp's byte and line, then the first differing
# lines (diff -u, cut to 200 columns) or, when that line is longer (a trace is one line), the 200
# bytes of each file around the first differing byte.
show_difference() {
  local golden="$1" actual="$2" where byte line from
  where="$(cmp "$golden" "$actual" 2>&1 | head -1)"
  echo "cmp: $where"
  byte="$(sed -n 's/.* byte \([0-9][0-9]*\).*/\1/p' <<<"$where")"
  line="$(sed -n 's/.* line \([0-9][0-9]*\).*/\1/p' <<<"$where")"
  if [[ -n "$byte" && -n "$line" ]] && (($(sed -n "${line}p" "$golden" | wc -c) > 200)); then
    from=$((byte > 80 ? byte - 80 : 1))
    echo "line $line is long; the 200 bytes from byte $from:"
    echo "  golden: $(tail -c +"$from" "$golden" | head -c 200)"
    echo "  actual: $(tail -c +"$from" "$actual" | head -c 200)"
  else
    echo "first differing lines (diff -u golden actual):"
    diff -u "$golden" "$actual" | sed -n '3,40p' | cut -c1-200
  fi
}

check() {
  local fsdpsim="$1" file="$2" out_dir="$3" entry args actual err
  entry="$(entries | awk -F'\t' -v f="$file" '$1 == f')" || return 2
  if [[ -z "$entry" ]]; then
    echo "golden.sh: '$file' is not in $manifest" >&2
    return 2
  fi
  args="${entry#*$'\t'}"
  mkdir -p "$out_dir"
  actual="$out_dir/$file"
  err="$out_dir/$file.stderr"
  echo "golden $file: fsdpsim $args"
  if ! produce "$fsdpsim" "$args" "$actual" "$err"; then
    echo "FAILED: $fsdpsim $args exited non-zero; its stderr:"
    head -20 "$err"
    return 1
  fi
  if [[ ! -f "$here/$file" ]]; then
    echo "FAILED: the golden file tests/golden/$file does not exist."
    regen_hint "$fsdpsim"
    return 1
  fi
  if cmp -s "$here/$file" "$actual"; then
    echo "identical to tests/golden/$file ($(wc -c <"$actual") bytes)"
    rm -f "$actual" "$err"
    return 0
  fi
  echo "FAILED: the output differs from the golden file tests/golden/$file"
  echo "actual output kept at $actual"
  show_difference "$here/$file" "$actual"
  regen_hint "$fsdpsim"
  return 1
}

stray() {
  local listed path status=0
  listed="$(entries | cut -f1)" || return 2
  for path in "$here"/*.json; do
    [[ -e "$path" ]] || continue
    if ! grep -qxF "$(basename "$path")" <<<"$listed"; then
      echo "FAILED: tests/golden/$(basename "$path") is not in tests/golden/manifest.txt" \
        "(scripts/update_golden.sh removes it)"
      status=1
    fi
  done
  ((status == 0)) && echo "every golden file is in the manifest"
  return $status
}

update() {
  local fsdpsim="$1" file args tmp changed=0 listed path
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' RETURN
  listed="$(entries | cut -f1)" || return 2
  while IFS=$'\t' read -r file args; do
    if ! produce "$fsdpsim" "$args" "$tmp/$file" "$tmp/err"; then
      echo "update_golden: fsdpsim $args failed; nothing was written. Its stderr:" >&2
      head -20 "$tmp/err" >&2
      return 1
    fi
  done < <(entries)
  # Every command ran: only now replace the golden files (all or none).
  while IFS=$'\t' read -r file args; do
    if cmp -s "$tmp/$file" "$here/$file"; then
      echo "same:    $file"
    else
      cp "$tmp/$file" "$here/$file"
      echo "written: $file"
      changed=$((changed + 1))
    fi
  done < <(entries)
  for path in "$here"/*.json; do
    [[ -e "$path" ]] || continue
    if ! grep -qxF "$(basename "$path")" <<<"$listed"; then
      rm -f "$path"
      echo "removed: $(basename "$path") (not in the manifest)"
      changed=$((changed + 1))
    fi
  done
  echo "$changed golden file(s) changed in tests/golden (from $fsdpsim)"
}

case "${1:-}" in
  check)
    [[ $# -eq 4 && -x "$2" ]] || {
      echo "usage: $0 check FSDPSIM FILE OUT_DIR" >&2
      exit 2
    }
    check "$2" "$3" "$4"
    ;;
  stray)
    stray
    ;;
  update)
    [[ $# -eq 2 && -x "$2" ]] || {
      echo "usage: $0 update FSDPSIM (an fsdpsim executable)" >&2
      exit 2
    }
    update "$2"
    ;;
  *)
    echo "usage: $0 check FSDPSIM FILE OUT_DIR | stray | update FSDPSIM" >&2
    exit 2
    ;;
esac
