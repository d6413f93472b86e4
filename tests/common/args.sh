# Sourced by script tests that build a base command and add what a case
# changes: staticpipe refuses an option given twice (launch/cli.h), so
#
# sp_last_wins CMD...: runs CMD with each option that repeats kept only at
#   its last place (its earlier occurrences and their values dropped).
#   An option is a word starting with '-'; it takes the next word as its
#   value unless that word starts with '-' or the option is --flag=VALUE.
# sp_last_wins_args VAR CMD...: the same words into the array VAR, not run
#   (for a command started in the background, whose process id matters).
sp_last_wins_args() {
  local -n sp_lw_out=$1
  shift
  local -a a=("$@")
  local n=$# i j takes later key
  sp_lw_out=()
  for ((i = 0; i < n; i++)); do
    takes=0
    if [[ ${a[i]} == -?* && ${a[i]} != *=* && $((i + 1)) -lt $n && ${a[i + 1]} != -* ]]; then
      takes=1
    fi
    later=0
    key=${a[i]%%=*}
    if [[ ${a[i]} == -?* ]]; then
      for ((j = i + 1 + takes; j < n; j++)); do
        [[ ${a[j]%%=*} == "$key" ]] && { later=1; break; }
      done
    fi
    if [ $later -eq 0 ]; then
      sp_lw_out+=("${a[i]}")
      [ $takes -eq 1 ] && sp_lw_out+=("${a[i + 1]}")
    fi
    i=$((i + takes))
  done
}

sp_last_wins() {
  local -a sp_lw_cmd
  sp_last_wins_args sp_lw_cmd "$@"
  "${sp_lw_cmd[@]}"
}
