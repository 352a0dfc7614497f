# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""The container runtime interface (CRI) as kubelet uses it, through the vendor's
client, crictl (kubernetes-sigs/cri-tools): the pod and container configs it
reads, and what its `version` and `info` print, for accel.nodes.cri_containers
and the CRI layer of accel.nodes.accelerator_validation.

Why this exists: crictl prints no JSON for `version`, and `info` prints the
CRI's status plus each runtime's own view of its config (containerd's CRI
plugin config), whose keys differ between containerd 1.x and 2.x. These few
functions read both. Everything else is crictl's own work.

Sources (cri-tools v1.36.0, ../shared/vendor-src): the config files are read
with sigs.k8s.io/yaml into the CRI structs, so the keys are the `json:` tags of
vendor/k8s.io/cri-api/pkg/apis/runtime/v1/api.pb.go (cmd/crictl/util.go,
loadPodSandboxConfig and loadContainerConfig); NamespaceMode NODE is 2
(api.pb.go); `version` prints "RuntimeVersion:  <v>" lines
(cmd/crictl/version.go, Version); `info` prints {"status", "runtimeHandlers",
"features", and the runtime's info keys, JSON objects decoded} (cmd/crictl/info.go
and util.go, outputStatusData)."""

from __future__ import annotations

import json
import re
import typing as t

# containerd's CRI, when the pod asks for a handler it has no runtime for:
# "no runtime for %q is configured" (containerd 1.6/1.7 pkg/cri/server/sandbox_run.go,
# 2.x internal/cri/server/sandbox_run.go). On 1.x the sandbox image is
# resolved first ("failed to get sandbox image").
NO_HANDLER = re.compile(r'no runtime for "([^"]*)" is configured')
_VERSION_LINE = re.compile(r'^(\w+):\s*(.*?)\s*$', re.MULTILINE)

# Hints for what crictl said, in containerd's words, and what to do.
HINTS = (
    (NO_HANDLER,
     'containerd has no runtime under that handler name: register it (accel.nodes.nvidia_container_toolkit with '
     'nvidia_container_toolkit_engines including containerd, or accel.nodes.neuron_container_runtime), and check '
     'that containerd reads the drop-in (containerd config dump); on EKS put it in NodeConfig spec.containerd.config, '
     'on k3s and rke2 restart the service after installing the toolkit'),
    (re.compile(r'failed to get sandbox image|failed to pull image .*pause|pause.* not found'),
     "containerd cannot find the pod sandbox (pause) image, and pulls it where it can: on an offline node, import "
     "it into containerd's k8s.io namespace (ctr -n k8s.io images import) under the name containerd's config "
     "gives (sandbox_image; 2.x: pinned_images.sandbox)"),
    (re.compile(r'CDI device injection failed'),
     'containerd could not inject the CDI device: nvidia-ctk cdi list names the devices the specs have; generate the '
     'spec again after a driver or GPU change'),
    (re.compile(r'expected cgroupsPath to be of format'),
     "the handler's SystemdCgroup does not match the pod's cgroup parent: kubelet's cgroupDriver and the "
     "runtime's SystemdCgroup must agree"),
)


# crictl reports a failed call through logrus: `time="..." level=fatal msg="<text, Go-quoted>"`, after
# klog's E-lines and warnings such as the missing /etc/crictl.yaml.
_FATAL = re.compile(r'level=fatal msg="((?:[^"\\]|\\.)*)"')


def crictl_error(text: t.Any) -> str:
    """What crictl said went wrong, unquoted: its fatal message, else its last line that is no warning."""
    text = str(text or '')
    found = _FATAL.findall(text)
    if found:
        try:
            return str(json.loads('"%s"' % found[-1]))
        except ValueError:
            return found[-1]
    lines = [line for line in text.splitlines() if line.strip() and 'level=warning' not in line]
    return lines[-1].strip() if lines else text.strip()


def parse_version(text: t.Any) -> dict[str, str]:
    """`crictl version` as {Version, RuntimeName, RuntimeVersion, RuntimeApiVersion}."""
    return dict(_VERSION_LINE.findall(str(text or '')))


def _dict(value: t.Any) -> dict[str, t.Any]:
    return value if isinstance(value, dict) else {}


def parse_info(text: t.Any) -> dict[str, t.Any]:
    """What `crictl info` says about the runtimes: {ready, runtimes: {handler: {type, options}}, default_runtime,
    enable_cdi, cdi_spec_dirs, sandbox_image, handlers}, from containerd's CRI config as its info reports it.
    containerd 1.x reports its whole CRI plugin config under "config"; 2.x reports the runtime plugin's there and
    the images plugin's separately (sandbox image under pinnedImages)."""
    try:
        data = json.loads(str(text or ''))
    except ValueError:
        data = {}
    data = _dict(data)
    config = _dict(data.get('config'))
    containerd = _dict(config.get('containerd'))
    runtimes = {}
    for name, runtime in _dict(containerd.get('runtimes')).items():
        runtime = _dict(runtime)
        runtimes[name] = {'type': runtime.get('runtimeType'), 'options': _dict(runtime.get('options'))}
    conditions = _dict(data.get('status')).get('conditions') or []
    ready = [c for c in conditions if isinstance(c, dict) and c.get('type') == 'RuntimeReady']
    images = _dict(data.get('imagesConfig') or data.get('images'))
    sandbox = (config.get('sandboxImage') or _dict(images.get('pinnedImages')).get('sandbox')
               or _dict(config.get('pinnedImages')).get('sandbox'))
    return {
        'ready': bool(ready and ready[0].get('status') is True),
        'runtimes': runtimes,
        'default_runtime': containerd.get('defaultRuntimeName'),
        'enable_cdi': config.get('enableCDI'),
        'cdi_spec_dirs': list(config.get('cdiSpecDirs') or []),
        'sandbox_image': sandbox,
        'handlers': [_dict(h).get('name') for h in data.get('runtimeHandlers') or [] if isinstance(h, dict)],
    }


def cgroup_parent(systemd: bool) -> str:
    """The pod's cgroup parent for the handler's cgroup driver. With SystemdCgroup, runc wants a slice
    ("slice:prefix:name", which containerd builds from the parent); with cgroupfs a path."""
    return 'accel_nodes_validation.slice' if systemd else '/accel-nodes-validation'


def pod_config(name: str, uid: str, log_directory: str, systemd: bool) -> dict[str, t.Any]:
    """A pod sandbox in the host's network namespace (NamespaceMode NODE = 2), so that no CNI is needed."""
    return {
        'metadata': {'name': name, 'namespace': 'accel-nodes', 'uid': uid, 'attempt': 0},
        'log_directory': log_directory,
        'linux': {'cgroup_parent': cgroup_parent(systemd),
                  'security_context': {'namespace_options': {'network': 2}}},
    }


def container_config(name: str, image: str, command: list[str], env: dict[str, t.Any] | None = None,
                     devices: list[str] | None = None, cdi_devices: list[str] | None = None,
                     mounts: list[dict[str, t.Any]] | None = None,
                     annotations: dict[str, t.Any] | None = None) -> dict[str, t.Any]:
    """A container config as kubelet sends it: environment, device nodes (HOST[:CONTAINER[:PERMISSIONS]]), CDI
    devices (the CRI field's tag is spelled CDI_devices), mounts and annotations, as a device plugin's Allocate
    answer gives them."""
    def device(spec: str) -> dict[str, str]:
        parts = str(spec).split(':')
        return {'host_path': parts[0], 'container_path': parts[1] if len(parts) > 1 and parts[1] else parts[0],
                'permissions': parts[2] if len(parts) > 2 else 'rwm'}
    return {
        'metadata': {'name': name},
        'image': {'image': image},
        'command': [str(arg) for arg in command],
        'envs': [{'key': str(k), 'value': str(v)} for k, v in (env or {}).items()],
        'devices': [device(spec) for spec in devices or []],
        'CDI_devices': [{'name': str(n)} for n in cdi_devices or []],
        'mounts': list(mounts or []),
        'annotations': dict((str(k), str(v)) for k, v in (annotations or {}).items()),
        'log_path': name + '.log',
        'linux': {},
    }


def hints(text: str) -> list[str]:
    return [hint for pattern, hint in HINTS if pattern.search(text)]
