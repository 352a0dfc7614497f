# TEST DOUBLE support code for the NVIDIA Container Toolkit doubles
# (nvidia-ctk, nvidia-container-runtime, nvidia-container-runtime-hook,
# nvidia-container-cli). Not the real toolkit. See tests/doubles/README.md.
"""What every toolkit double shares: the simulated GPUs and the config file."""

import json
import os
import re
import sys
import time

try:
    import tomllib
except ImportError:  # Python < 3.11: the doubles then read no config keys
    tomllib = None

VERSION = '1.17.8'
# The simulated GPUs of this host; written by the test (see README.md). The
# host nvidia-smi double of the driver packages reads the same file.
GPUS_FILE = os.environ.get('ACCEL_TEST_GPUS') or os.environ.get('ACCEL_TEST_GPUS_FILE') or '/etc/accel-test/gpus.json'
CONFIG_FILE = '/etc/nvidia-container-runtime/config.toml'

# What the real `nvidia-ctk config --in-place` writes on Debian for 1.17.8
# (Ubuntu differs only in ldconfig = "@/sbin/ldconfig.real").
DEFAULT_CONFIG = '''\
#accept-nvidia-visible-devices-as-volume-mounts = false
#accept-nvidia-visible-devices-envvar-when-unprivileged = true
disable-require = false
supported-driver-capabilities = "compat32,compute,display,graphics,ngx,utility,video"
#swarm-resource = "DOCKER_RESOURCE_GPU"

[nvidia-container-cli]
#debug = "/var/log/nvidia-container-toolkit.log"
environment = []
#ldcache = "/etc/ld.so.cache"
ldconfig = "@/sbin/ldconfig"
load-kmods = true
#no-cgroups = false
#path = "/usr/bin/nvidia-container-cli"
#root = "/run/nvidia/driver"
#user = "root:video"

[nvidia-container-runtime]
#debug = "/var/log/nvidia-container-runtime.log"
log-level = "info"
mode = "auto"
runtimes = ["runc", "crun"]

[nvidia-container-runtime.modes]

[nvidia-container-runtime.modes.cdi]
annotation-prefixes = ["cdi.k8s.io/"]
default-kind = "nvidia.com/gpu"
spec-dirs = ["/etc/cdi", "/var/run/cdi"]

[nvidia-container-runtime.modes.csv]
mount-spec-path = "/etc/nvidia-container-runtime/host-files-for-container.d"

[nvidia-container-runtime.modes.legacy]
cuda-compat-mode = "ldconfig"

[nvidia-container-runtime-hook]
path = "nvidia-container-runtime-hook"
skip-mode-detection = false

[nvidia-ctk]
path = "nvidia-ctk"
'''

NO_DRIVER = ('load library failed: libnvidia-ml.so.1: cannot open shared object file: '
             'no such file or directory')


class DoubleError(Exception):
    """A failure the real tool would also report."""


def load_config(path=CONFIG_FILE):
    """The parsed config.toml, or {} when it is missing. A broken file is an error, as for the real runtime."""
    if tomllib is None or not os.path.exists(path):
        return {}
    try:
        with open(path, 'rb') as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise DoubleError('unable to load config: %s: %s' % (path, e))


def section(cfg, name):
    value = cfg.get(name, {})
    return value if isinstance(value, dict) else {}


def load_gpus(path=GPUS_FILE):
    """The simulated driver: {'driver_version', 'cuda_version', 'gpus': [...]}, or None without a driver
    (no file, or "driver_loaded": false).

    Each GPU gets index, name, uuid, pci_bus_id and memory_total_mib; missing
    fields are filled in the same way every time.
    """
    if not os.path.exists(path):
        return None
    with open(path) as f:
        data = json.load(f)
    if isinstance(data, list):
        data = {'gpus': data}
    if not data.get('driver_loaded', True):
        return None
    gpus = []
    for i, g in enumerate(data.get('gpus') or []):
        gpus.append({
            'index': i,
            'name': str(g.get('name', 'NVIDIA Test Double GPU')),
            'uuid': str(g.get('uuid', 'GPU-00000000-0000-0000-0000-%012d' % i)),
            'pci_bus_id': str(g.get('pci_bus_id', '00000000:%02X:00.0' % (0x10 + i))),
            'memory_total_mib': int(g.get('memory_total_mib', 16384)),
        })
    return {
        'driver_version': str(data.get('driver_version', '580.159.04')),
        'cuda_version': str(data.get('cuda_version', '13.0')),
        'gpus': gpus,
    }


def read_cdi_specs(spec_dirs):
    """{qualified device name: set of /dev/nvidiaN minors} from CDI specs (JSON, or YAML in nvidia-ctk's layout)."""
    devices = {}
    for directory in spec_dirs:
        if not os.path.isdir(directory):
            continue
        for name in sorted(os.listdir(directory)):
            path = os.path.join(directory, name)
            if name.endswith('.json'):
                with open(path) as f:
                    doc = json.load(f)
                for dev in doc.get('devices') or []:
                    nodes = (dev.get('containerEdits') or {}).get('deviceNodes') or []
                    devices['%s=%s' % (doc.get('kind'), dev.get('name'))] = {
                        int(m.group(1)) for n in nodes for m in [re.match(r'/dev/nvidia(\d+)$', n.get('path', ''))] if m}
            elif name.endswith(('.yaml', '.yml')):
                devices.update(_read_cdi_yaml(path))
    return devices


def _read_cdi_yaml(path):
    kind, current, found, in_devices = None, None, {}, False
    with open(path) as f:
        for line in f:
            if not line.strip() or line.lstrip().startswith('#'):
                continue
            top = not line[0].isspace() and not line.startswith('-')
            if top:
                in_devices = line.startswith('devices:')
                current = None
                m = re.match(r'kind:\s*"?([^"\s]+)"?', line)
                if m:
                    kind = m.group(1)
                continue
            if not in_devices:
                continue
            m = re.match(r'(\s*)-\s+name:\s*"?([^"]+?)"?\s*$', line)
            if m and len(m.group(1)) <= 2:
                current = m.group(2)
                found.setdefault(current, set())
                continue
            m = re.search(r'path:\s*"?/dev/nvidia(\d+)"?\s*$', line)
            if m and current is not None:
                found[current].add(int(m.group(1)))
    return {'%s=%s' % (kind, name): minors for name, minors in found.items()}


def debug_log(path, component, message):
    """Append one line to a configured debug log, as the real tools do when `debug` is set."""
    if not path:
        return
    try:
        d = os.path.dirname(path)
        if d:
            os.makedirs(d, exist_ok=True)
        with open(path, 'a') as f:
            f.write('%s %s[%d]: %s\n' % (time.strftime('%Y-%m-%dT%H:%M:%S'), component, os.getpid(), message))
    except OSError:
        pass


def die(tool, message, rc=1):
    sys.stderr.write('%s: %s\n' % (tool, message))
    sys.exit(rc)
