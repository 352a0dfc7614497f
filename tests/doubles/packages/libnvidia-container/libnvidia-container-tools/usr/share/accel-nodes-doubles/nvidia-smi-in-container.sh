#!/bin/sh
# TEST DOUBLE of nvidia-smi, as seen inside a container. Not the real tool.
# The nvidia-container-cli double copies this script to /usr/bin/nvidia-smi in the
# container, next to a file listing the GPUs the container asked for. In CDI mode
# the Molecule scenarios' own CDI spec mounts it, with one file per device in
# gpus.d/ (the spec's common edits mount the driver's line, each device its GPU's).
# Emulates: `nvidia-smi`, `nvidia-smi -L`, and
# `nvidia-smi --query-gpu=FIELDS --format=csv[,noheader][,nounits]`.
# Shell builtins only: the test image is busybox. See tests/doubles/README.md.
data=/usr/share/nvidia-container-double/gpus

records() { # the lines of the GPU list: one file, or one file per CDI device
  if [ -r "$data" ]; then
    while IFS= read -r line; do echo "$line"; done <"$data"
  else
    for f in "$data".d/*; do
      [ -r "$f" ] || continue
      while IFS= read -r line; do echo "$line"; done <"$f"
    done
  fi
}
list=$(records)

driver=
count=0
while IFS='|' read -r a b c _; do
  case $a in
    driver) driver=$b cuda=$c ;;
    nodriver) driver= ;;
    '') ;;
    *) count=$((count + 1)) ;;
  esac
done <<EOF
$list
EOF
if [ -z "$driver" ]; then
  echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."
  exit 9
fi

mode=table query='' header=1 units=1
for arg in "$@"; do
  case $arg in
    -L | --list-gpus) mode=list ;;
    --query-gpu=*) mode=query query=${arg#--query-gpu=} ;;
    --format=*)
      case ${arg#--format=} in *noheader*) header= ;; esac
      case ${arg#--format=} in *nounits*) units= ;; esac
      ;;
    *)
      echo "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help."
      exit 2
      ;;
  esac
done

if [ "$count" -eq 0 ]; then
  echo "No devices were found"
  exit 6
fi

gpu_lines() { # calls "$1 idx name uuid pci mem" per GPU
  i=0
  while IFS='|' read -r idx name uuid pci mem; do
    case $idx in driver | nodriver | '') continue ;; esac
    # Numbered from 0 in the container, as the real tool numbers the GPUs it sees.
    "$1" "$i" "$name" "$uuid" "$pci" "$mem"
    i=$((i + 1))
  done <<EOF
$list
EOF
}

list_one() { echo "GPU $1: $2 (UUID: $3)"; }

table_one() {
  printf '| %3s  %-41s | %-16s | %19s |\n' "$1" "$2" "$4" "0MiB / ${5}MiB"
}

query_one() {
  line='' sep=''
  old_ifs=$IFS
  IFS=,
  for f in $query; do
    case $f in
      index) v=$1 ;;
      name | gpu_name) v=$2 ;;
      uuid | gpu_uuid) v=$3 ;;
      pci.bus_id | gpu_bus_id) v=$4 ;;
      memory.total) if [ -n "$units" ]; then v="$5 MiB"; else v=$5; fi ;;
      driver_version) v=$driver ;;
      count) v=$count ;;
    esac
    line="$line$sep$v" sep=', '
  done
  IFS=$old_ifs
  echo "$line"
}

case $mode in
  list) gpu_lines list_one ;;
  query)
    line='' sep=''
    old_ifs=$IFS
    IFS=,
    for f in $query; do
      case $f in
        index | name | gpu_name | uuid | gpu_uuid | pci.bus_id | gpu_bus_id | driver_version | count) h=$f ;;
        memory.total) if [ -n "$units" ]; then h='memory.total [MiB]'; else h=memory.total; fi ;;
        *)
          echo "Field \"$f\" is not a valid field to query."
          exit 2
          ;;
      esac
      line="$line$sep$h" sep=', '
    done
    IFS=$old_ifs
    [ -z "$header" ] || echo "$line"
    gpu_lines query_one
    ;;
  table)
    echo "+-----------------------------------------------------------------------------------------+"
    printf '| NVIDIA-SMI %-20s Driver Version: %-14s CUDA Version: %-10s |\n' "$driver" "$driver" "$cuda"
    echo "|------------------------------------------------+------------------+---------------------|"
    printf '| %-46s | %-16s | %19s |\n' "GPU  Name" "Bus-Id" "Memory-Usage"
    echo "|================================================+==================+=====================|"
    gpu_lines table_one
    echo "+-----------------------------------------------------------------------------------------+"
    echo "| Processes:                                                                              |"
    echo "|  No running processes found                                                             |"
    echo "+-----------------------------------------------------------------------------------------+"
    ;;
esac
