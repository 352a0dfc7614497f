#!/usr/bin/env bash
# The daemon-reload trap (NVIDIA/nvidia-container-toolkit#48), inside the
# real-GPU tier's node (run.sh): with the /dev/char links of the NVIDIA device
# nodes removed, start a GPU container, run `systemctl daemon-reload`, and ask
# nvidia-smi in the container again. Where the container's device rules exist
# only outside systemd's view, the reload rewrites its cgroup from what systemd
# knows, and NVML then fails with "Unknown Error".
#   trap.sh NAME IMAGE DOCKER_RUN_ARGS...
# ACCEL_TRAP_RUNC names the runc the nvidia runtime runs (config.toml's
# nvidia-container-runtime.runtimes), when it is not the node's own.
# Prints one line: NAME, the runc and toolkit that ran it, nvidia-smi before and
# after, the DeviceAllow systemd holds for the container's scope, and whether a
# process in the container's cgroup may open /dev/nvidiactl; then puts
# the links back (nvidia-ctk system create-dev-char-symlinks --create-all).
set -u
name=$1 image=$2
shift 2
links=$(find /dev/char -maxdepth 1 -lname '*nvidia*' -printf '%f ' 2>/dev/null)
find /dev/char -maxdepth 1 -lname '*nvidia*' -delete 2>/dev/null
docker rm -f accel-trap >/dev/null 2>&1
# cat on an open stdin waits for ever and needs no sleep binary in the image.
if ! id=$(docker run -d -i --name accel-trap --network none "$@" "$image" cat 2>&1); then
  echo "$name: the container did not start: $id"
else
  before=$(docker exec accel-trap nvidia-smi -L 2>&1 | head -1)
  systemctl daemon-reload
  sleep 2
  after=$(docker exec accel-trap nvidia-smi -L 2>&1 | head -1)
  scope=$(systemctl list-units --no-legend --plain "docker-${id:0:12}*.scope" 2>/dev/null | awk '{print $1}' | head -1)
  allow=$(systemctl show -p DeviceAllow --value "$scope" 2>/dev/null | tr ' ' '\n' | grep -c 'char-195\|195:' || :)
  # What a diagnosis could read of a container that lost its GPUs (issue 28,
  # fault 2): whether a process in the container's cgroup may open
  # /dev/nvidiactl (the device cgroup's verdict, without entering the
  # container), and on cgroup v1 the devices.list the kernel holds.
  cg=$(systemctl show -p ControlGroup --value "$scope" 2>/dev/null)
  dir=
  for d in "/sys/fs/cgroup$cg" "/sys/fs/cgroup/devices$cg"; do [ -z "$cg" ] || [ ! -w "$d/cgroup.procs" ] || dir=$d; done
  if [ -n "$dir" ]; then
    # shellcheck disable=SC2016 # $$ is the inner shell's
    opened=$(sh -c 'echo $$ >"$1/cgroup.procs" && exec dd if=/dev/nvidiactl of=/dev/null count=0 status=none' sh "$dir" 2>&1 && echo ok)
    list=$([ -r "$dir/devices.list" ] && tr '\n' ' ' <"$dir/devices.list")
  fi
  runc=$("${ACCEL_TRAP_RUNC:-runc}" --version 2>/dev/null | head -1)
  ctk=$(nvidia-ctk --version 2>/dev/null | head -1)
  echo "$name: $ctk; $runc; /dev/char links removed: ${links:-none}; before reload: $before; after reload: $after; DeviceAllow entries for 195:* in ${scope:-no scope}: $allow; cgroup ${dir:-not found}; open /dev/nvidiactl from it: ${opened:-not tried}; devices.list: ${list:-none}"
fi
docker rm -f accel-trap >/dev/null 2>&1
nvidia-ctk system create-dev-char-symlinks --create-all >/dev/null 2>&1 || :
