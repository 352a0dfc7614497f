#!/usr/bin/env bash
# The device-plugin allocation test of the real-GPU tier (issue 26; tests/hardware/README.md),
# inside the node (run.sh): NVIDIA's k8s-device-plugin v0.20.0 on the host this
# collection prepared, a stand-in for kubelet's device manager (kubelet_stub.py), and
# the Allocate answer fed into a CRI container through crictl and the `nvidia` runtime
# handler. For each strategy, that container must list exactly the GPU it was allocated.
#
#   allocate.sh PLUGIN API_PROTO IMAGE OUTDIR [STRATEGY...]
#
# PLUGIN     the nvidia-device-plugin binary (tests/rig/device-plugin.sh);
# API_PROTO  the device-plugin api.proto it vendors (the same directory);
# IMAGE      an image with a shell and glibc and nothing of the driver, already in
#            containerd's k8s.io namespace, as is the CRI's sandbox (pause) image;
# OUTDIR     gets <strategy>.json per strategy (the report) and <strategy>/ (logs, configs);
# STRATEGY   envvar and cdi-cri by default (DP/README.md:225,308-329; DP/api/config/v1/consts.go:39-42).
#
# Runs as root with systemd, containerd and crictl on PATH, the toolkit installed and
# the role's `nvidia` handler registered. Environment:
#   CONTAINER_RUNTIME_ENDPOINT  crictl's endpoint (default unix:///run/containerd/containerd.sock)
#   ACCEL_DP_HANDLER            the CRI runtime handler (default nvidia)
#   ACCEL_DP_DRIVER_ROOT        where the driver's bin/nvidia-smi is (default: /usr/local/nvidia, else /usr)
#   ACCEL_DP_TIMEOUT            seconds for each step of the stub and the container (default 60)
#   ACCEL_DP_EXPECT_NO_GPU      strategies whose container must see no GPU, space-separated: envvar
#                               under the toolkit's accept-nvidia-visible-devices-envvar-when-unprivileged
#                               = false (NCT api/config/v1/config.go:64, toml.go:255), which the
#                               kubernetes profile sets: the allocation goes through, the runtime ignores it
# Exit status: 0 when every strategy passed or was skipped with a reason, 1 when one
# failed, 2 when a precondition is missing (the message says what to do).
#
# Vendor facts (DP = k8s-device-plugin-0.20.0/, CT = cri-tools-1.36.0/):
# - the plugin registers on kubelet's socket, /var/lib/kubelet/device-plugins/kubelet.sock
#   (DP/cmd/nvidia-device-plugin/main.go:168-174 default; DP/vendor/k8s.io/kubelet/pkg/apis/
#   deviceplugin/v1beta1/constants.go:30-32), and restarts when that socket is created
#   (main.go:317-321): the stub listens first, then the plugin starts;
# - outside its container the plugin finds the driver at --driver-root-ctr-path, default
#   /driver-root (main.go:133-139, DP/api/config/v1/consts.go:61; NVML through it:
#   main.go:358-363, cmd/nvidia-device-plugin/root.go:50-74; CDI specs: plugin-manager.go:37,52-58),
#   so it gets `/` here, as --driver-root (main.go:74-80, default `/`) is;
# - --nvidia-cdi-hook-path, default /usr/bin/nvidia-ctk (main.go:126-132, consts.go:60), which
#   the toolkit installs; its hooks then run as `nvidia-ctk hook` (DP/vendor/github.com/NVIDIA/
#   nvidia-container-toolkit/internal/discover/hooks.go:281-286);
# - in CDI modes the plugin writes its own spec to /var/run/cdi for vendor
#   k8s.device-plugin.nvidia.com (DP/internal/cdi/cdi.go:41,212; plugin-manager.go:60);
#   nvcdi finds nvidia-smi through PATH, so the driver's bin goes on it;
# - crictl reads the CRI structs by their json tags (CT/cmd/crictl/util.go:201-279; tags in
#   CT/vendor/k8s.io/cri-api/pkg/apis/runtime/v1/api.pb.go, ContainerConfig 5623-5680, where
#   CDI devices are `CDI_devices`); NamespaceMode NODE = 2 (api.pb.go:176); --timeout is a global
#   flag, 2 s by default (CT/cmd/crictl/main.go:47,257-262), too short for a GPU container's start;
# - CDI devices through the CRI came in containerd 1.7 (DP/docs/cdi.md:14-16): on
#   containerd 1.6 the cdi-cri allocation is still asked for, and the container part skipped.
set -euo pipefail
if [ $# -lt 4 ]; then
  echo "usage: $0 PLUGIN API_PROTO IMAGE OUTDIR [STRATEGY...]" >&2
  exit 2
fi
plugin=$(realpath "$1") proto=$(realpath "$2") image=$3 out=$(realpath -m "$4")
shift 4
strategies=("$@")
[ ${#strategies[@]} -gt 0 ] || strategies=(envvar cdi-cri)
here=$(cd "$(dirname "$0")" && pwd)
handler=${ACCEL_DP_HANDLER:-nvidia}
timeout=${ACCEL_DP_TIMEOUT:-60}
export CONTAINER_RUNTIME_ENDPOINT=${CONTAINER_RUNTIME_ENDPOINT:-unix:///run/containerd/containerd.sock}
driver_root=${ACCEL_DP_DRIVER_ROOT:-}
if [ -z "$driver_root" ]; then
  for d in /usr/local/nvidia /usr; do [ -x "$d/bin/nvidia-smi" ] && { driver_root=$d; break; }; done
fi
sockets=/var/lib/kubelet/device-plugins # constants.go:30
cdi_specs=/var/run/cdi                  # DP/internal/cdi/cdi.go:41

die() { echo "allocate.sh: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "run it as root: the plugin reads NVML and writes $sockets and $cdi_specs"
[ -x "$plugin" ] || die "no plugin binary at $plugin: build it with tests/rig/device-plugin.sh"
[ -f "$proto" ] || die "no api.proto at $proto: tests/rig/device-plugin.sh puts it beside the binary"
[ -n "$driver_root" ] || die "no nvidia-smi under /usr/local/nvidia or /usr: set ACCEL_DP_DRIVER_ROOT"
command -v crictl >/dev/null || die "no crictl on PATH: build it with tests/rig/crictl.sh"
python3 -c 'import grpc, grpc_tools' 2>/dev/null ||
  die "python3 cannot import grpc and grpc_tools: install Debian's python3-grpcio and python3-grpc-tools in the node"
# crictl's config of its own: without one, crictl 1.36 warns on stderr that /etc/crictl.yaml
# does not exist (CT/cmd/crictl/main_unix.go:27), and the warning lands in what the checks
# below read. Keys: CT/pkg/common/file.go:42-45.
mkdir -p "$out"
printf 'runtime-endpoint: %s\nimage-endpoint: %s\n' "$CONTAINER_RUNTIME_ENDPOINT" "$CONTAINER_RUNTIME_ENDPOINT" >"$out/crictl.yaml"
cri() { crictl --config "$out/crictl.yaml" --timeout "${timeout}s" "$@"; }
cri version >/dev/null 2>&1 || die "crictl gets no answer from $CONTAINER_RUNTIME_ENDPOINT: $(cri version 2>&1 | tail -1)"

# What the CRI says about itself: containerd's version, the sandbox image, the handler's
# cgroup driver, enable_cdi. containerd 1.x reports its CRI config under "config";
# 2.x the runtime plugin's there and the sandbox image under pinnedImages.
facts=$(cri version 2>&1 | python3 -c '
import json, re, subprocess, sys
version = dict(re.findall(r"^(\w+):\s*(\S+)", sys.stdin.read(), re.M))
info = json.loads(subprocess.run(["crictl", "info"], capture_output=True, text=True).stdout or "{}")
config = info.get("config") or {}
runtime = ((config.get("containerd") or {}).get("runtimes") or {}).get(sys.argv[1]) or {}
images = info.get("imagesConfig") or info.get("images") or {}
sandbox = (config.get("sandboxImage") or (images.get("pinnedImages") or {}).get("sandbox")
           or (config.get("pinnedImages") or {}).get("sandbox") or "")
print(json.dumps({"runtime_name": version.get("RuntimeName"), "runtime_version": version.get("RuntimeVersion"),
                  "handler": sys.argv[1], "handler_known": bool(runtime),
                  "systemd_cgroup": bool((runtime.get("options") or {}).get("SystemdCgroup")),
                  "enable_cdi": config.get("enableCDI"), "sandbox_image": sandbox}))
' "$handler")
fact() { python3 -c 'import json, sys; v = json.loads(sys.argv[1])[sys.argv[2]]; print("" if v is None else v)' "$facts" "$1"; }
[ "$(fact handler_known)" = True ] ||
  die "containerd's CRI has no runtime handler \"$handler\": register it with accel.nodes.container_runtime"
sandbox=$(fact sandbox_image)
if [ -n "$sandbox" ] && ! cri inspecti "$sandbox" >/dev/null 2>&1; then
  die "the sandbox image $sandbox is not in containerd's k8s.io store and no registry is reachable: ctr -n k8s.io images import it"
fi
cri inspecti "$image" >/dev/null 2>&1 ||
  die "the image $image is not in containerd's k8s.io store: docker save $image | ctr -n k8s.io images import -"
cdi_reason=
case $(fact runtime_version) in
  v1.6.* | 1.6.* | v1.[0-5].* | 1.[0-5].*)
    cdi_reason="containerd $(fact runtime_version) has no CDI devices in its CRI (they came in 1.7: DP/docs/cdi.md:14-16)" ;;
esac
[ -n "$cdi_reason" ] || [ "$(fact enable_cdi)" != False ] ||
  cdi_reason="containerd's CRI has enable_cdi = false: CDI_devices would be ignored"
if [ "$(fact systemd_cgroup)" = True ]; then cgroup_parent=accel_dp.slice; else cgroup_parent=/accel-dp; fi

mkdir -p "$out"
plugin_pid='' stub_pid='' pods=()
specs_before=$(find "$cdi_specs" -mindepth 1 -maxdepth 1 2>/dev/null || :)
cleanup() {
  local p
  for p in "${pods[@]}"; do cri rmp -f "$p" >/dev/null 2>&1 || :; done
  [ -z "$stub_pid" ] || kill "$stub_pid" 2>/dev/null || :
  if [ -n "$plugin_pid" ] && kill "$plugin_pid" 2>/dev/null; then # SIGTERM: the plugin stops its servers (main.go:335-337)
    for _ in $(seq 50); do kill -0 "$plugin_pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$plugin_pid" 2>/dev/null || :
  fi
  plugin_pid='' stub_pid='' pods=()
  for p in "$cdi_specs"/*; do # the specs this run's plugin wrote
    [ -e "$p" ] || continue
    grep -qxF "$p" <<<"$specs_before" || rm -f "$p"
  done
}
trap cleanup EXIT
trap 'exit 143' TERM INT

# run_pod NAME DIR CRI_FIELDS_JSON: a pod on the host network with the handler, one
# container that runs nvidia-smi -L; writes DIR/NAME-{pod,container}.json and
# DIR/NAME.txt (its output) and sets run_rc to the exit code ("none" when it did not run).
run_pod() {
  local name=$1 dir=$2 fields=$3 pod cid state="" i
  run_rc=none
  python3 - "$dir" "$name" "$cgroup_parent" "$image" "$fields" "$driver_root" <<'PY'
import json, os, sys
dir, name, parent, image, fields, driver_root = sys.argv[1:7]
pod = {'metadata': {'name': 'accel-dp-%s-%d' % (name, os.getpid()), 'namespace': 'accel-nodes',
                    'uid': 'accel-dp-%s-%d' % (name, os.getpid()), 'attempt': 0},
       'log_directory': os.path.join(dir, 'logs'),
       'linux': {'cgroup_parent': parent, 'security_context': {'namespace_options': {'network': 2}}}}
# The image puts nothing of the driver anywhere: what nvidia-smi there is comes from the
# toolkit, at its host path (the driver root's bin).
container = {'metadata': {'name': name}, 'image': {'image': image},
             'command': ['/bin/sh', '-c', 'PATH=$PATH:%s/bin; echo NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES; '
                         'nvidia-smi -L' % driver_root],
             'log_path': name + '.log', 'linux': {}}
container.update(json.loads(fields))
for kind, config in (('pod', pod), ('container', container)):
    with open(os.path.join(dir, '%s-%s.json' % (name, kind)), 'w') as f:
        json.dump(config, f, indent=2)
PY
  mkdir -p "$dir/logs"
  pod=$(cri runp --runtime "$handler" "$dir/$name-pod.json" 2>"$dir/$name.txt") || return 0
  pods+=("$pod")
  if ! cid=$(cri create --no-pull "$pod" "$dir/$name-container.json" "$dir/$name-pod.json" 2>>"$dir/$name.txt") ||
    ! cri start "$cid" >/dev/null 2>>"$dir/$name.txt"; then
    return 0 # cleanup removes the pod
  fi
  for ((i = 0; i < timeout * 20; i++)); do
    state=$(cri inspect -o go-template --template '{{.status.state}}' "$cid" 2>/dev/null || :)
    [ "$state" = CONTAINER_EXITED ] && break
    sleep 0.05
  done
  cri logs "$cid" >"$dir/$name.txt" 2>&1 || :
  if [ "$state" = CONTAINER_EXITED ]; then
    run_rc=$(cri inspect -o go-template --template '{{.status.exitCode}}' "$cid" 2>/dev/null || :)
  else
    echo "(the container is still ${state:-unknown} after ${timeout}s)" >>"$dir/$name.txt"
  fi
  cri rmp -f "$pod" >/dev/null 2>&1 || :
}

# The GPU lines nvidia-smi -L printed, one UUID a line.
listed() { sed -n 's/^GPU [0-9]*: .*(UUID: \(GPU-[^)]*\)).*/\1/p' "$1" 2>/dev/null || :; }

# A control first: the handler with no allocation must show no GPU, or a pass below
# would prove nothing about the plugin's answer.
mkdir -p "$out/control"
run_pod control "$out/control" '{}'
control_gpus=$(listed "$out/control/control.txt" | tr '\n' ' ' | sed 's/ $//')
if [ "$run_rc" = none ]; then
  echo "allocate.sh: the control container did not run with handler $handler; see $out/control/control.txt" >&2
  cat "$out/control/control.txt" >&2
  exit 1
fi
if [ -n "$control_gpus" ]; then
  echo "allocate.sh: the control container lists GPUs without an allocation ($control_gpus):" \
    "does $handler give every container NVIDIA_VISIBLE_DEVICES?" >&2
  exit 1
fi

failed=0
for strategy in "${strategies[@]}"; do
  dir=$out/$strategy
  rm -rf "$dir" && mkdir -p "$dir"
  started=$(date +%s.%N)
  # The stub's socket first: the plugin registers once at start, and restarts when it appears later.
  python3 "$here/kubelet_stub.py" --proto "$proto" --dir "$sockets" --timeout "$timeout" \
    >"$dir/allocate.json" 2>"$dir/kubelet-stub.log" &
  stub_pid=$!
  for _ in $(seq 200); do
    [ -S "$sockets/kubelet.sock" ] || ! kill -0 "$stub_pid" 2>/dev/null && break
    sleep 0.05
  done
  flags=(--device-list-strategy="$strategy" --driver-root=/ --driver-root-ctr-path=/ --nvidia-cdi-hook-path=/usr/bin/nvidia-ctk)
  PATH=$driver_root/bin:$PATH "$plugin" "${flags[@]}" >"$dir/plugin.log" 2>&1 &
  plugin_pid=$!
  # A plugin that exits (no NVML, a bad flag) ends the wait at once, not at the stub's timeout.
  while kill -0 "$stub_pid" 2>/dev/null && kill -0 "$plugin_pid" 2>/dev/null; do sleep 0.1; done
  kill -0 "$plugin_pid" 2>/dev/null || kill "$stub_pid" 2>/dev/null || :
  stub_rc=0
  wait "$stub_pid" || stub_rc=$?
  stub_pid=
  result=pass reason='' uuid='' rc=none gpus=''
  if [ "$stub_rc" != 0 ]; then
    kill -0 "$plugin_pid" 2>/dev/null || reason="the plugin exited; "
    result=fail
    reason="${reason}kubelet_stub (rc $stub_rc): $(tail -1 "$dir/kubelet-stub.log");"
    reason="$reason plugin: $(grep -E '^[EF][0-9]' "$dir/plugin.log" | tail -2 | tr '\n' ' ')"
  else
    uuid=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["allocated"])' "$dir/allocate.json")
    fields=$(python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))["cri"]))' "$dir/allocate.json")
    if [ "$strategy" != envvar ] && [ "$strategy" != volume-mounts ] && [ -n "$cdi_reason" ]; then
      result=skip reason="the allocation went through; the container is not run: $cdi_reason"
    else
      run_pod check "$dir" "$fields"
      rc=$run_rc
      gpus=$(listed "$dir/check.txt" | tr '\n' ' ' | sed 's/ $//')
      if [[ " ${ACCEL_DP_EXPECT_NO_GPU:-} " == *" $strategy "* ]]; then
        if [ "$rc" = none ] || [ -n "$gpus" ]; then
          result=fail reason="expected no GPU; the container exited $rc and lists [$gpus]"
        else
          reason="allocated $uuid; as expected, the container sees no GPU (it exited $rc)"
        fi
      elif [ "$rc" != 0 ]; then
        result=fail reason="the container exited $rc: $(grep -v '^NVIDIA_VISIBLE_DEVICES=' "$dir/check.txt" | head -3 | tr '\n' ' ')"
      elif [ "$gpus" != "$uuid" ]; then
        result=fail reason="nvidia-smi -L in the container lists [$gpus], not exactly the allocated $uuid"
      fi
    fi
  fi
  cleanup
  specs_before=$(find "$cdi_specs" -mindepth 1 -maxdepth 1 2>/dev/null || :)
  python3 - "$out/$strategy.json" "$dir" "$strategy" "$result" "$reason" "$rc" "$gpus" "$started" "$facts" \
    "$control_gpus" "${flags[@]}" <<'PY'
import json, os, sys, time
path, dir, strategy, result, reason, rc, gpus, started, facts, control = sys.argv[1:11]
def load(name):
    try:
        with open(os.path.join(dir, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
def text(name):
    try:
        with open(os.path.join(dir, name)) as f:
            return f.read().splitlines()
    except OSError:
        return None
report = {'strategy': strategy, 'result': result, 'reason': reason or None,
          'plugin_flags': sys.argv[11:], 'cri': json.loads(facts),
          'control_gpus': control.split(), 'allocation': load('allocate.json'),
          'container_config': load('check-container.json'), 'container_exit_code': rc,
          'container_output': text('check.txt'), 'container_gpus': gpus.split(),
          'seconds': round(time.time() - float(started), 2)}
with open(path, 'w') as f:
    json.dump(report, f, indent=2)
PY
  printf 'allocate.sh: %-8s %-4s %s\n' "$strategy" "$result" "${reason:-allocated $uuid, the container lists exactly it}" | tee -a "$out/summary.txt"
  [ "$result" != fail ] || failed=1
done
exit "$failed"
